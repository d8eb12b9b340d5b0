package storage

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// IdleFiles is an FS whose files give their descriptor back while nobody
// uses them. A node holds thousands of partitions and each keeps its
// segment and commit log open; most are idle at any moment, and a
// container's open-file limit (20,000 is common) would otherwise cap a
// node at a few thousand partitions. A file closed this way reopens on its
// next use, which the caller never sees.
//
// Sweep closes what was not used since the previous Sweep. Without a
// Syncer a file with writes not yet synced stays open, so its fsync goes
// through the descriptor the writes went through; with one, the node's
// syncfs writes back a closed file's pages and reports their errors, and a
// partition's own fsync on a reopened descriptor still reports an error
// nobody has seen (Linux 4.16 and later). Past Budget open
// files, opening one more first closes those no call is using, so a node
// starting with more partitions than descriptors gets through recovery.
type IdleFiles struct {
	// Budget bounds the descriptors held before files not in use are
	// closed to make room; zero means no bound. Set it before use.
	Budget int64
	// Syncer, if set, counts a file's writes as synced once a syncfs
	// covers them, as well as after the file's own Sync. Set it before use.
	Syncer *Syncer

	fs       FS
	open     atomic.Int64
	evicting atomic.Bool

	mu    sync.Mutex
	files map[*idleFile]struct{}
}

// NewIdleFiles wraps fs; nil means OSFS.
func NewIdleFiles(fs FS) *IdleFiles {
	if fs == nil {
		fs = OSFS{}
	}
	return &IdleFiles{fs: fs, files: map[*idleFile]struct{}{}}
}

// OpenFile opens name through the wrapped FS. Later reopens use the same
// flags without O_CREATE, O_EXCL and O_TRUNC: the file exists by then, and
// must not be emptied.
func (p *IdleFiles) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := p.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	lf := &idleFile{pool: p, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm, f: f, used: true}
	p.opened()
	p.mu.Lock()
	p.files[lf] = struct{}{}
	p.mu.Unlock()
	return lf, nil
}

// opened counts a descriptor taken, and makes room when past the budget:
// down to three quarters of it in one pass, so the pass is paid once per
// many opens.
func (p *IdleFiles) opened() {
	n := p.open.Add(1)
	if p.Budget <= 0 || n <= p.Budget || !p.evicting.CompareAndSwap(false, true) {
		return
	}
	defer p.evicting.Store(false)
	target := p.Budget * 3 / 4
	for _, f := range p.snapshot() {
		if p.open.Load() <= target {
			return
		}
		f.closeIfUnused()
	}
}

func (p *IdleFiles) snapshot() []*idleFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	files := make([]*idleFile, 0, len(p.files))
	for f := range p.files {
		files = append(files, f)
	}
	return files
}

// Open is how many of the pool's files hold a descriptor now.
func (p *IdleFiles) Open() int64 { return p.open.Load() }

// Sweep closes the descriptors of files nobody used since the previous
// Sweep and that hold no unsynced writes; it returns how many it closed.
func (p *IdleFiles) Sweep() int {
	closed := 0
	for _, f := range p.snapshot() {
		if f.sweep() {
			closed++
		}
	}
	return closed
}

// Run sweeps every interval until ctx ends, so a file is closed after
// between one and two intervals without use.
func (p *IdleFiles) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.Sweep()
		}
	}
}

type idleFile struct {
	pool *IdleFiles
	name string
	flag int
	perm os.FileMode

	mu     sync.Mutex
	f      File   // nil while the descriptor is given back
	users  int    // calls under way on f
	used   bool   // since the last sweep
	dirty  bool   // written since the last successful Sync
	gen    uint64 // what the pool's Syncer must pass to cover the last write
	closed bool
}

func (l *idleFile) acquire() (File, error) {
	l.mu.Lock()
	f, reopened, err := l.take()
	l.mu.Unlock()
	if reopened {
		l.pool.opened() // may close other files, so not under l.mu
	}
	return f, err
}

// take marks a call under way on the descriptor, opening it again if it
// was given back.
func (l *idleFile) take() (f File, reopened bool, err error) {
	if l.closed {
		return nil, false, os.ErrClosed
	}
	if l.f == nil {
		if l.f, err = l.pool.fs.OpenFile(l.name, l.flag, l.perm); err != nil {
			l.f = nil
			return nil, false, err
		}
		reopened = true
	}
	l.users++
	l.used = true
	return l.f, reopened, nil
}

func (l *idleFile) release(wrote bool) {
	var gen uint64
	if wrote && l.pool.Syncer != nil {
		gen = l.pool.Syncer.Written()
	}
	l.mu.Lock()
	l.users--
	if wrote {
		l.dirty, l.gen = true, gen
	}
	l.mu.Unlock()
}

func (l *idleFile) sweep() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.used {
		l.used = false
		return false
	}
	return l.closeLocked()
}

// closeIfUnused closes the descriptor, recently used or not, unless a call
// is under way on it or it holds unsynced writes.
func (l *idleFile) closeIfUnused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeLocked()
}

func (l *idleFile) closeLocked() bool {
	if l.dirty && l.pool.Syncer != nil && l.pool.Syncer.Covered(l.gen) {
		l.dirty = false
	}
	if l.f == nil || l.users > 0 || l.dirty && l.pool.Syncer == nil {
		return false
	}
	l.f.Close()
	l.f = nil
	l.pool.open.Add(-1)
	return true
}

func (l *idleFile) ReadAt(b []byte, off int64) (int, error) {
	f, err := l.acquire()
	if err != nil {
		return 0, err
	}
	defer l.release(false)
	return f.ReadAt(b, off)
}

func (l *idleFile) WriteAt(b []byte, off int64) (int, error) {
	f, err := l.acquire()
	if err != nil {
		return 0, err
	}
	defer l.release(true)
	return f.WriteAt(b, off)
}

func (l *idleFile) Truncate(size int64) error {
	f, err := l.acquire()
	if err != nil {
		return err
	}
	defer l.release(true)
	return f.Truncate(size)
}

// Sync of a clean file whose descriptor was given back has nothing to do;
// one closed with unsynced writes is reopened for its fsync.
func (l *idleFile) Sync() error {
	l.mu.Lock()
	clean := l.f == nil && !l.closed && !l.dirty
	l.mu.Unlock()
	if clean {
		return nil
	}
	f, err := l.acquire()
	if err != nil {
		return err
	}
	err = f.Sync()
	l.mu.Lock()
	l.users--
	if err == nil {
		l.dirty = false
	}
	l.mu.Unlock()
	return err
}

func (l *idleFile) Stat() (os.FileInfo, error) {
	f, err := l.acquire()
	if err != nil {
		return nil, err
	}
	defer l.release(false)
	return f.Stat()
}

func (l *idleFile) Name() string { return l.name }

func (l *idleFile) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return os.ErrClosed
	}
	l.closed = true
	f := l.f
	l.f = nil
	l.mu.Unlock()
	l.pool.mu.Lock()
	delete(l.pool.files, l)
	l.pool.mu.Unlock()
	if f == nil {
		return nil
	}
	l.pool.open.Add(-1)
	return f.Close()
}
