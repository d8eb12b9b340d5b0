package storage

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/internal/rawio"
)

// File is what the segment and commit logs need of an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Name() string
	Close() error
}

// FS opens a partition's segment and commit-log files. The operating
// system's is the default; tests put a fault-injecting one in its place to
// fail fsyncs or fill the disk.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
}

// OSFS opens files with the os package. Its files write with raw system
// calls (internal/rawio) while writes return quickly: an append usually
// only copies into the page cache, and an ordinary call would wake the
// runtime's monitor thread on the publish's path. A write that blocks
// holds its goroutine's processor meanwhile, so one that took longer than
// slowWrite turns raw writes off, for the whole process, for rawPause.
type OSFS struct {
	// ScheduledWrites makes every write an ordinary system call.
	ScheduledWrites bool
}

// OpenFile is os.OpenFile.
func (fs OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if fs.ScheduledWrites {
		return f, nil
	}
	return osFile{f}, nil
}

const (
	// slowWrite is longer than copying the largest record into the page
	// cache, and than the time slice another process takes the CPU for
	// between two instructions of a raw write, so only a write the kernel
	// made wait (dirty-page throttling, a journal commit) passes it.
	slowWrite = 5 * time.Millisecond
	rawPause  = time.Second
)

// rawWrites is the process's gate for raw file writes.
var rawWrites = rawGate{epoch: time.Now()}

// rawGate decides whether a file write may be a raw system call: one at a
// time, and none for rawPause after one took longer than slowWrite. A raw
// call the disk holds keeps its processor, so only one processor is ever
// kept that way; and a write found held past slowWrite by the next one
// closes the gate at once, not only when it returns.
type rawGate struct {
	epoch  time.Time
	closed atomic.Int64 // since epoch: raw writes wait until then
	busy   atomic.Int64 // 1 + since epoch when the raw write in flight began; 0: none
}

func (g *rawGate) open(now time.Duration) bool { return now >= time.Duration(g.closed.Load()) }

// enter claims the raw write at now, or reports that the caller writes the
// ordinary way.
func (g *rawGate) enter(now time.Duration) bool {
	if !g.open(now) {
		return false
	}
	if g.busy.CompareAndSwap(0, int64(now)+1) {
		return true
	}
	if since := g.busy.Load(); since != 0 && now-time.Duration(since-1) > slowWrite {
		g.closed.Store(int64(now + rawPause))
	}
	return false
}

// leave ends the raw write entered at start.
func (g *rawGate) leave(start, end time.Duration) {
	g.busy.Store(0)
	g.took(start, end)
}

func (g *rawGate) took(start, end time.Duration) {
	if end-start > slowWrite {
		g.closed.Store(int64(end + rawPause))
	}
}

func (g *rawGate) now() time.Duration { return time.Since(g.epoch) }

type osFile struct{ *os.File }

func (f osFile) WriteAt(b []byte, off int64) (int, error) {
	start := rawWrites.now()
	if len(b) == 0 || !rawWrites.enter(start) {
		return f.File.WriteAt(b, off)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		rawWrites.leave(start, start)
		return f.File.WriteAt(b, off)
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		n, werr = rawio.Pwrite(fd, b, off)
		return true
	}); err != nil {
		rawWrites.leave(start, start)
		return 0, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	rawWrites.leave(start, rawWrites.now())
	if errors.Is(werr, errors.ErrUnsupported) {
		return f.File.WriteAt(b, off)
	}
	if werr != nil {
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: werr}
	}
	return n, nil
}
