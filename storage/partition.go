package storage

import (
	"errors"
	"fmt"
	"time"
)

const (
	// DefaultSyncEvery is nsqd's --sync-every default.
	DefaultSyncEvery = 2500
	// DefaultSyncTimeout is nsqd's --sync-timeout default.
	DefaultSyncTimeout = 2 * time.Second

	commitLogName = "commit.log"
)

// Options tunes a Partition. Zero values take the defaults.
type Options struct {
	SegmentBytes int64         // default DefaultSegmentBytes
	SyncEvery    int           // commits between fsyncs; 1 = every commit; default DefaultSyncEvery
	SyncTimeout  time.Duration // longest time a commit stays unsynced; default DefaultSyncTimeout
	// OnSync, if set, hears how long each successful sync of both files
	// took, for metrics.
	OnSync func(time.Duration)
	FS     FS // opens the files; default OSFS
	// Syncer, if set, covers SyncTimeout for every partition of the node
	// with one syncfs, and is asked for one at once when SyncEvery (above
	// 1) commits wait, so a partition fsyncs its own files only at
	// SyncEvery 1, at Close, and to probe the disk after a failure.
	Syncer *Syncer
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes < 0 || o.SyncEvery < 0 || o.SyncTimeout < 0 {
		return o, fmt.Errorf("storage: negative option in %+v", o)
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SyncEvery == 0 {
		o.SyncEvery = DefaultSyncEvery
	}
	if o.SyncTimeout == 0 {
		o.SyncTimeout = DefaultSyncTimeout
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	return o, nil
}

// Partition is the durable state of one partition: its segment log and its
// commit log, with the fsync policy over both. Its methods and its commit log
// belong to the partition actor; only Log's reads are safe from other
// goroutines, for the channel actors that read what the actor appends.
type Partition struct {
	Log     *Log
	Commits *CommitLog

	dir           string
	opt           Options
	unsynced      int
	firstUnsynced time.Time
	coverGen      uint64 // what the Syncer must pass to cover the last commit
	asked         syncAsk
	syncs         int64 // fsyncs of its own
	askedSyncs    int64 // syncfs calls it asked for that covered its commits
	closed        bool
	// syncErr is the last fsync's failure, nil once one succeeds. After a
	// failed fsync the kernel may have dropped the pages it covered, so
	// nothing more is committed until a sync goes through.
	syncErr error
}

// Dir is the partition's directory.
func (p *Partition) Dir() string { return p.dir }

// Commit appends r to the commit log; its messages must already be in the
// log. Every SyncEvery commits both files are synced. While fsyncs fail
// nothing is committed: each Commit first retries the sync, so commits
// resume by themselves once the disk works again. A record whose own sync
// fails is taken back out of the commit log, so its publishers, who hear
// the error, never find it committed after a restart.
func (p *Partition) Commit(r CommitRecord) error {
	return p.CommitAll([]CommitRecord{r})
}

// CommitAll commits rs, in order, with one write to the commit log, as
// Commit would one by one; each counts towards SyncEvery. If the write or
// the sync it makes due fails, none of rs is committed.
func (p *Partition) CommitAll(rs []CommitRecord) error {
	if p.closed {
		return ErrClosed
	}
	if len(rs) == 0 {
		return nil
	}
	if p.syncErr != nil || p.syncerFailed() {
		if err := p.Sync(); err != nil {
			return err
		}
	}
	p.noteCovered()
	first, last := rs[0], rs[len(rs)-1]
	if last.End() > p.Log.End() || first.MsgOffset < p.Log.Start() {
		return fmt.Errorf("%w: range [%d, %d) not in log [%d, %d)", ErrInvalidCommit, first.MsgOffset, last.End(), p.Log.Start(), p.Log.End())
	}
	before := p.Commits.Count()
	if err := p.Commits.AppendAll(rs); err != nil {
		return err
	}
	if p.unsynced == 0 {
		p.firstUnsynced = time.Now()
	}
	p.unsynced += len(rs)
	if p.opt.Syncer != nil {
		p.coverGen = p.opt.Syncer.Written()
	}
	if p.unsynced >= p.opt.SyncEvery {
		if p.askSyncer() {
			return nil
		}
		if err := p.Sync(); err != nil {
			p.unsynced -= len(rs)
			return errors.Join(err, p.Commits.TruncateTo(before))
		}
	}
	return nil
}

// SetSyncEvery changes how many commits go between fsyncs from the next
// commit on (a topic's syncdisk changed); 0 is DefaultSyncEvery. Commits
// already past a lowered count are synced with the next one.
func (p *Partition) SetSyncEvery(n int) {
	if n <= 0 {
		n = DefaultSyncEvery
	}
	p.opt.SyncEvery = n
}

// SyncEvery is how many commits go between fsyncs.
func (p *Partition) SyncEvery() int { return p.opt.SyncEvery }

// SyncErr is the failure of the last fsync, nil when it succeeded.
func (p *Partition) SyncErr() error { return p.syncErr }

// SyncDue is true when a commit has waited SyncTimeout or longer for a sync
// that is the partition's own to make.
func (p *Partition) SyncDue(now time.Time) bool {
	due, ok := p.SyncDeadline()
	return ok && !now.Before(due)
}

// SyncDeadline is when the oldest unsynced commit has waited SyncTimeout;
// false when every commit is synced, so an idle partition needs no timer,
// and while a Syncer covers the timeout for it.
func (p *Partition) SyncDeadline() (time.Time, bool) {
	p.noteCovered()
	if p.unsynced == 0 || p.opt.Syncer != nil && p.syncErr == nil && !p.syncerFailed() {
		return time.Time{}, false
	}
	return p.firstUnsynced.Add(p.opt.SyncTimeout), true
}

// syncAsk is a syncfs a partition asked for: the commits waiting when it
// asked count as synced once one that began after them succeeds.
type syncAsk struct {
	gen      uint64 // Syncer generation of the last of those commits
	commits  int    // 0: none asked for
	segments int    // segments rotated out before the ask, which it covers too
}

// askSyncer asks the node's Syncer to cover the commits waiting, instead of
// an fsync of the partition's own, and reports whether it did. At
// SyncEvery 1 every commit is synced before it is answered, so that one
// stays the partition's own; so does any sync after a failure, and one
// when twice SyncEvery commits wait: a disk that falls that far behind the
// syncfs holds the writes back, so no more than that is ever unsynced.
func (p *Partition) askSyncer() bool {
	if p.opt.Syncer == nil || p.opt.SyncEvery <= 1 || p.syncErr != nil || p.syncerFailed() ||
		p.unsynced >= 2*p.opt.SyncEvery {
		return false
	}
	if p.asked.commits == 0 {
		p.asked = syncAsk{gen: p.coverGen, commits: p.unsynced, segments: p.Log.rotatedUnsynced()}
		p.opt.Syncer.Soon()
	}
	return true
}

// noteCovered counts the commits a syncfs covered as synced.
func (p *Partition) noteCovered() {
	if p.opt.Syncer == nil || p.syncErr != nil {
		return
	}
	if p.asked.commits > 0 && p.opt.Syncer.Covered(p.asked.gen) {
		p.unsynced = max(p.unsynced-p.asked.commits, 0)
		p.Log.syncedElsewhere(p.asked.segments)
		p.asked = syncAsk{}
		p.askedSyncs++
	}
	if p.unsynced > 0 && p.opt.Syncer.Covered(p.coverGen) {
		p.unsynced = 0
		p.asked = syncAsk{}
	}
}

// syncerFailed: the node's last syncfs failed, so this partition finds out
// with an fsync of its own whether its files are safe, and stops
// committing if they are not, as without a Syncer.
func (p *Partition) syncerFailed() bool {
	return p.unsynced > 0 && p.opt.Syncer != nil && p.opt.Syncer.Failed(p.coverGen)
}

// Sync flushes the log and the commit log, in that order, so a synced commit
// record never points at unsynced messages.
func (p *Partition) Sync() error {
	if p.closed {
		return ErrClosed
	}
	start := time.Now()
	if err := p.Log.Sync(); err != nil {
		p.syncErr = fmt.Errorf("storage: fsync of the segment log: %w", err)
		return p.syncErr
	}
	if err := p.Commits.Sync(); err != nil {
		p.syncErr = fmt.Errorf("storage: fsync of the commit log: %w", err)
		return p.syncErr
	}
	p.syncErr = nil
	p.unsynced = 0
	p.asked = syncAsk{}
	p.syncs++
	if p.opt.OnSync != nil {
		p.opt.OnSync(time.Since(start))
	}
	return nil
}

// Syncs counts the syncs made for the partition's commits, for metrics:
// its own fsyncs and the node's syncfs calls it asked for past SyncEvery,
// not those that ran for the node's timeout.
func (p *Partition) Syncs() int64 {
	p.noteCovered()
	return p.syncs + p.askedSyncs
}

// Committed is the end offset and the message count of the last commit
// record, (0, 0) when nothing is committed.
func (p *Partition) Committed() (end int64, count int64) {
	r, ok := p.Commits.Last()
	if !ok {
		return 0, 0
	}
	return r.End(), r.LastCount()
}

// Close syncs and closes both files.
func (p *Partition) Close() error {
	if p.closed {
		return ErrClosed
	}
	err := p.Sync()
	p.closed = true
	return errors.Join(err, p.Log.Close(), p.Commits.Close())
}
