package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// Syncer makes the time-driven fsyncs of every partition on a node one
// syncfs(2) of the data directory's filesystem per SyncTimeout. Two fsyncs
// per partition every SyncTimeout cost nothing for one partition and
// everything for ten thousand busy ones: the disk, not the data, becomes
// the limit. One syncfs writes back the same bytes in one pass.
//
// A write is covered once a syncfs that began after it has succeeded: a
// writer calls Written after each write, keeps the generation it returns,
// and asks Covered later. A partition past --sync-every commits asks for a
// syncfs at once (Soon) rather than fsync its files on its own turn: an
// fsync there holds every write behind it for as long as the disk takes,
// on each replica in turn, and that was the largest part of a replicated
// write's tail (docs/operations.md, "Fsyncs beside the writes").
type Syncer struct {
	timeout time.Duration
	dir     *os.File
	journal *Journal // syncs this instead of dir's filesystem when set
	onSync  func(time.Duration)

	started    atomic.Uint64 // syncfs calls begun
	done       atomic.Uint64 // the latest begun call that succeeded
	dirtySince atomic.Int64  // UnixNano of the oldest write no syncfs has begun after; 0 when none
	failed     atomic.Pointer[error]
	// lost: writes whose Written returned less than this may have lost
	// their pages in a failed syncfs (the kernel reports a failed
	// write-back once), so no later success covers them.
	lost atomic.Uint64
	soon atomic.Bool // a syncfs is wanted without waiting for the timeout
	wake chan struct{}
}

// NewSyncer syncs the filesystem holding dir; it fails where syncfs does
// not work, and the caller then keeps every fsync per partition.
func NewSyncer(dir string, timeout time.Duration, onSync func(time.Duration)) (*Syncer, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("storage: sync timeout %v must be positive", timeout)
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syncfs(d); err != nil {
		d.Close()
		return nil, fmt.Errorf("storage: syncfs on %s: %w", dir, err)
	}
	return &Syncer{timeout: timeout, dir: d, onSync: onSync, wake: make(chan struct{}, 1)}, nil
}

// NewJournalSyncer covers writes with a sync of the node's journal, which
// records every write a Partition makes through j.FS, rather than with a
// syncfs.
func NewJournalSyncer(j *Journal, timeout time.Duration, onSync func(time.Duration)) (*Syncer, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("storage: sync timeout %v must be positive", timeout)
	}
	return &Syncer{timeout: timeout, journal: j, onSync: onSync, wake: make(chan struct{}, 1)}, nil
}

// Written notes a write that has completed and returns the generation a
// syncfs must pass to cover it.
func (s *Syncer) Written() uint64 {
	gen := s.started.Load()
	if s.dirtySince.Load() == 0 && s.dirtySince.CompareAndSwap(0, time.Now().UnixNano()) {
		s.signal()
	}
	return gen
}

// Soon asks for a syncfs now rather than when the oldest write has waited
// the timeout. Asks made while one is under way are answered by the next.
func (s *Syncer) Soon() {
	s.soon.Store(true)
	s.signal()
}

func (s *Syncer) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Covered reports whether every write whose Written returned gen is synced.
func (s *Syncer) Covered(gen uint64) bool { return s.done.Load() > gen && gen >= s.lost.Load() }

// Failed reports whether the writes whose Written returned gen cannot be
// covered by a syncfs: the last one failed, or one that began after them
// did, so their writer must find out with an fsync of its own.
func (s *Syncer) Failed(gen uint64) bool { return s.Err() != nil || gen < s.lost.Load() }

// Err is the last syncfs's failure, nil once one succeeds.
func (s *Syncer) Err() error {
	if e := s.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// Run syncs whenever the oldest uncovered write has waited the timeout, or
// at once when asked to (Soon), until ctx ends; with nothing written it
// waits without waking.
func (s *Syncer) Run(ctx context.Context) {
	if s.dir != nil {
		defer s.dir.Close()
	}
	for s.waitDue(ctx) {
		s.soon.Store(false)
		s.syncOnce()
	}
}

// waitDue waits until a syncfs is due, and reports false when ctx ended
// first. Any wake (a first write, Soon) makes it look again.
func (s *Syncer) waitDue(ctx context.Context) bool {
	for {
		if s.soon.Load() {
			return true
		}
		var due <-chan time.Time // nil with nothing written: only a wake ends the wait
		if since := s.dirtySince.Load(); since != 0 {
			wait := time.Until(time.Unix(0, since).Add(s.timeout))
			if wait <= 0 {
				return true
			}
			due = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return false
		case <-s.wake:
		case <-due:
			return true
		}
	}
}

// syncOnce begins a generation after clearing the dirty mark, so a write
// that lands meanwhile either is covered by this call or marks the next.
func (s *Syncer) syncOnce() {
	s.dirtySince.Store(0)
	gen := s.started.Add(1)
	start := time.Now()
	if err := s.sync(); err != nil {
		s.failed.Store(&err)
		// Writes made while it ran may have been in its write-back too.
		raise(&s.lost, gen+1)
		// Mark it dirty again so the sync is retried after the timeout.
		s.dirtySince.CompareAndSwap(0, time.Now().UnixNano())
		return
	}
	s.failed.Store(nil)
	raise(&s.done, gen)
	if s.onSync != nil {
		s.onSync(time.Since(start))
	}
}

func (s *Syncer) sync() error {
	if s.journal != nil {
		return s.journal.Sync()
	}
	if err := syncfs(s.dir); err != nil {
		return fmt.Errorf("storage: syncfs: %w", err)
	}
	return nil
}

// raise sets a to v unless it holds more already.
func raise(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

var errNoSyncfs = errors.New("syncfs is not available on this system")
