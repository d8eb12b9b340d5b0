// Package faultfs is a storage.FS that injects disk faults for tests: fsync
// errors and a disk that fills up, each switched on and off while the
// partition runs, so a test can see a node refuse writes and then recover.
package faultfs

import (
	"os"
	"sync"
	"syscall"

	"github.com/partitamq/partita/storage"
)

// ErrSync is the error a failing fsync returns unless another is given.
var ErrSync = &os.PathError{Op: "fsync", Path: "faultfs", Err: syscall.EIO}

// FS wraps the operating system's files.
type FS struct {
	mu       sync.Mutex
	syncErr  error
	capacity int64 // bytes all files may hold together; <0 is unlimited
	sizes    map[string]int64
	syncs    int
}

// New returns an FS without faults.
func New() *FS {
	return &FS{capacity: -1, sizes: map[string]int64{}}
}

// FailSync makes every fsync fail with err (ErrSync if nil) until Heal.
func (fs *FS) FailSync(err error) {
	if err == nil {
		err = ErrSync
	}
	fs.mu.Lock()
	fs.syncErr = err
	fs.mu.Unlock()
}

// Fill makes the disk full: files may grow by at most free more bytes in
// total. A write that does not fit writes what fits and fails with ENOSPC,
// as a real full disk does.
func (fs *FS) Fill(free int64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.capacity = fs.used() + free
}

// Heal clears every fault.
func (fs *FS) Heal() {
	fs.mu.Lock()
	fs.syncErr = nil
	fs.capacity = -1
	fs.mu.Unlock()
}

// Syncs counts fsyncs attempted, failed ones included.
func (fs *FS) Syncs() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.syncs
}

func (fs *FS) used() int64 {
	var n int64
	for _, s := range fs.sizes {
		n += s
	}
	return n
}

// OpenFile opens name through the fault layer.
func (fs *FS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	fs.mu.Lock()
	fs.sizes[name] = fi.Size()
	fs.mu.Unlock()
	return &file{File: f, fs: fs}, nil
}

type file struct {
	*os.File
	fs *FS
}

func (f *file) WriteAt(b []byte, off int64) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	size := fs.sizes[f.Name()]
	fits := len(b)
	if grow := off + int64(len(b)) - size; fs.capacity >= 0 && grow > 0 {
		if room := fs.capacity - fs.used(); grow > room {
			fits = int(max(0, min(int64(len(b)), size+room-off)))
		}
	}
	fs.mu.Unlock()
	n, err := f.File.WriteAt(b[:fits], off)
	fs.mu.Lock()
	if end := off + int64(n); end > fs.sizes[f.Name()] {
		fs.sizes[f.Name()] = end
	}
	fs.mu.Unlock()
	if err == nil && fits < len(b) {
		err = &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return n, err
}

func (f *file) Truncate(size int64) error {
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.sizes[f.Name()] = size
	f.fs.mu.Unlock()
	return nil
}

func (f *file) Sync() error {
	f.fs.mu.Lock()
	err := f.fs.syncErr
	f.fs.syncs++
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}
