package storage

import (
	"context"
	"math/rand/v2"
	"os"
	"slices"
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
// files, opening one more first closes a few that no call is using, so a
// node holding more partition files than descriptors goes on writing: a
// node of 10,000 partitions has 20,000 files, and a container's limit of
// 20,000 leaves fewer descriptors than that.
type IdleFiles struct {
	// Budget bounds the descriptors held before files not in use are
	// closed to make room; zero means no bound. Set it before use.
	Budget int64
	// Syncer, if set, counts a file's writes as synced once a syncfs
	// covers them, as well as after the file's own Sync. Set it before use.
	Syncer *Syncer

	fs       FS
	open     atomic.Int64
	reopens  atomic.Uint64 // descriptors taken again, ever
	evicting atomic.Bool

	mu    sync.Mutex
	files []*idleFile // every file its owner has not closed; idleFile.slot is its index
	hand  int         // where the eviction under way looks next
	start *rand.Rand  // where each eviction pass puts the hand
	// churn: files whose descriptor was given back and taken again, in
	// the order they were reopened (idleFile.churning marks them). An
	// eviction closes these first, the latest first.
	churn []*idleFile
}

// NewIdleFiles wraps fs; nil means OSFS.
func NewIdleFiles(fs FS) *IdleFiles {
	if fs == nil {
		fs = OSFS{}
	}
	return &IdleFiles{fs: fs, start: rand.New(rand.NewPCG(1, 2))}
}

// OpenFile opens name through the wrapped FS. Later reopens use the same
// flags without O_CREATE, O_EXCL and O_TRUNC: the file exists by then, and
// must not be emptied.
func (p *IdleFiles) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := p.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	lf := &idleFile{pool: p, name: name, flag: flag &^ (os.O_CREATE | os.O_EXCL | os.O_TRUNC), perm: perm, f: f, used: true, recent: true}
	p.opened()
	p.mu.Lock()
	lf.slot = len(p.files)
	p.files = append(p.files, lf)
	p.mu.Unlock()
	return lf, nil
}

// Remove removes name through the wrapped FS, which may need to hear of it.
func (p *IdleFiles) Remove(name string) error { return removeFile(p.fs, name) }

// forget removes a file its owner closed.
func (p *IdleFiles) forget(l *idleFile) {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := len(p.files) - 1
	moved := p.files[last]
	p.files[l.slot], moved.slot = moved, l.slot
	p.files[last] = nil
	p.files = p.files[:last]
	l.slot = -1
	if l.churning {
		l.churning = false
		i := slices.Index(p.churn, l)
		p.churn = slices.Delete(p.churn, i, i+1)
	}
}

// opened counts a descriptor taken, and makes room when past the budget.
func (p *IdleFiles) opened() {
	n := p.open.Add(1)
	if p.Budget <= 0 || n <= p.Budget || !p.evicting.CompareAndSwap(false, true) {
		return
	}
	defer p.evicting.Store(false)
	p.evict(p.Budget - evictSlack(p.Budget))
}

// evictSlack is how far below the budget an eviction closes files: a
// small part of it, so that a pass is short. The call that opens past the
// budget pays for the pass, and a pass closing a quarter of 20,000 files
// held that partition's write, and the actor runs waiting behind it, for
// tens of milliseconds; with writes spread over more files than the
// budget, passes come every few hundred opens either way.
func evictSlack(budget int64) int64 { return max(budget/128, 1) }

// evict closes files no call is using until at most target hold a
// descriptor. It closes files that were reopened first (churned), and
// then the files a clock hand passes.
//
// Reopened files go first, the latest reopened first, because writes
// spread round robin over more files than the budget use every file once
// a round: a file reopened just now was used just now, and the round
// comes back to it last. Closing those keeps the same files open round
// after round, and only the files past the budget are reopened, about
// (files − budget) / files of the writes (a tenth at 10,000 partitions),
// where the clock alone reopened one write in four. A reopened file used
// again since the use that reopened it is busy, not churning, and is left
// to the clock, and so is one reopened soon after it was closed this way
// (busyAgain).
//
// The clock takes files in the order of a hand that goes round
// the files, and passes over a file used since the hand last came by,
// once (the CLOCK approximation of least recently used): a node's busy
// partitions keep their descriptors while idle ones give theirs up. It
// stops after two turns, when every file left is in use or unsynced.
//
// Each pass puts the hand at a random file. Writes spread round robin over
// more partitions than the budget covers use every file once a round, so
// every file is recent when the hand comes by; a hand that went on from
// where it stopped would then close the files the round reaches next, as
// least recently used does, and every write would reopen its file. From a
// random place a pass closes files anywhere in the round, and most writes
// find theirs open.
func (p *IdleFiles) evict(target int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.evictChurned(target)
	if len(p.files) > 0 {
		p.hand = p.start.IntN(len(p.files))
	}
	for range 2 * len(p.files) {
		if p.open.Load() <= target {
			return
		}
		if p.hand >= len(p.files) {
			p.hand = 0
		}
		f := p.files[p.hand]
		p.hand++
		f.closeUnlessRecent()
	}
}

// evictChurned closes reopened files, the latest first, until at most
// target hold a descriptor, and forgets those it closed and those it met
// that are busy or gone. Under p.mu.
func (p *IdleFiles) evictChurned(target int64) {
	var kept []*idleFile // of those looked at, latest first
	i := len(p.churn) - 1
	for ; i >= 0 && p.open.Load() > target; i-- {
		if f := p.churn[i]; p.keepChurning(f, f.closeChurned()) {
			kept = append(kept, f)
		}
	}
	slices.Reverse(kept)
	n := copy(p.churn[i+1:], kept)
	clear(p.churn[i+1+n:])
	p.churn = p.churn[:i+1+n]
}

// reopened notes that l took a descriptor again. Without a budget
// nothing is evicted, and nothing is noted.
func (p *IdleFiles) reopened(l *idleFile) {
	if p.Budget <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if l.churning || l.slot < 0 {
		return
	}
	l.churning = true
	p.churn = append(p.churn, l)
}

func (p *IdleFiles) snapshot() []*idleFile {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.files)
}

// Open is how many of the pool's files hold a descriptor now.
func (p *IdleFiles) Open() int64 { return p.open.Load() }

// Sweep closes the descriptors of files nobody used since the previous
// Sweep and that hold no unsynced writes; it returns how many it closed.
// It forgets the reopened files that are closed or busy now, so that one
// reopened again joins the churn at its end.
func (p *IdleFiles) Sweep() int {
	closed := 0
	for _, f := range p.snapshot() {
		if f.sweep() {
			closed++
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.churn = slices.DeleteFunc(p.churn, func(f *idleFile) bool {
		return !p.keepChurning(f, false)
	})
	return closed
}

// keepChurning reports whether f stays in the churn, and unmarks one that
// does not: closed just now (closed), closed already, or busy. Under p.mu.
func (p *IdleFiles) keepChurning(f *idleFile, closed bool) bool {
	if !closed && f.churnable() {
		return true
	}
	f.churning = false
	return false
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

	slot     int  // in the pool's files, under the pool's lock; -1 once forgotten
	churning bool // in the pool's churn, under the pool's lock

	mu     sync.Mutex
	f      File // nil while the descriptor is given back
	users  int  // calls under way on f
	used   bool // since the last sweep
	recent bool // used since the eviction hand last came by
	// busy: used again since the descriptor was last taken, or taken
	// again soon after the churn closed it (busyAgain); the churn leaves
	// a busy file to the clock.
	busy bool
	// churnedAt is the pool's reopens when the churn closed this file,
	// until it is reopened; 0 otherwise.
	churnedAt uint64
	dirty     bool   // written since the last successful Sync
	gen       uint64 // what the pool's Syncer must pass to cover the last write
	closed    bool
}

func (l *idleFile) acquire() (File, error) {
	l.mu.Lock()
	f, reopened, err := l.take()
	l.mu.Unlock()
	if reopened {
		// Not under l.mu: both take the pool's lock, and opened may
		// close other files.
		l.pool.reopened(l)
		l.pool.opened()
	}
	return f, err
}

// busyAgain: a file the churn closed and that was reopened before this
// many other reopens is in use between every few opens, and busy: under
// writes round robin a whole round of reopens, the files past the budget,
// comes between the two.
func (p *IdleFiles) busyAgain() uint64 { return uint64(4 * evictSlack(p.Budget)) }

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
		n := l.pool.reopens.Add(1)
		l.busy = l.churnedAt != 0 && n-l.churnedAt < l.pool.busyAgain()
		l.churnedAt = 0
	} else {
		l.busy = true
	}
	l.users++
	l.used, l.recent = true, true
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

// closeUnlessRecent closes the descriptor unless it was used since the
// eviction hand last came by, which it forgets, a call is under way on it,
// or it holds unsynced writes.
func (l *idleFile) closeUnlessRecent() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.recent {
		l.recent = false
		return
	}
	l.closeLocked()
}

// closeChurned closes the descriptor of a reopened file unless it became
// busy, a call is under way on it, or it holds unsynced writes.
func (l *idleFile) closeChurned() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy || !l.closeLocked() {
		return false
	}
	l.churnedAt = l.pool.reopens.Load()
	return true
}

// churnable reports whether l still belongs in the pool's churn: open,
// not closed by its owner, and not busy.
func (l *idleFile) churnable() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f != nil && !l.closed && !l.busy
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
	l.pool.forget(l)
	if f == nil {
		return nil
	}
	l.pool.open.Add(-1)
	return f.Close()
}
