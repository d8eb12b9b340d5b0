package storage

import (
	"fmt"
	"os"
	"slices"
	"time"
)

// Retention deletes whole segment files from the front of the log, never a
// part of one, so no record is ever cut: segments are rotated only between
// appends, and an append is whole records. Commit records of deleted data
// stay in the commit log; searches skip them.

// RetentionPolicy says what may go. Zero fields do not apply.
type RetentionPolicy struct {
	MaxAge   time.Duration // a segment last written longer ago may go
	MaxBytes int64         // the oldest segments go while the log is larger
}

// Retain deletes the oldest segments that lie wholly before limit (the
// smallest confirmed offset of the partition's channels) and that the
// policy lets go. The active segment is never deleted. It returns how many
// segments and bytes were deleted.
func (p *Partition) Retain(policy RetentionPolicy, limit int64, now time.Time) (segments int, bytes int64, err error) {
	if p.closed {
		return 0, 0, ErrClosed
	}
	if policy.MaxAge <= 0 && policy.MaxBytes <= 0 {
		return 0, 0, nil
	}
	return p.Log.dropFront(func(base, end, logEnd int64, mod time.Time) bool {
		if end > limit {
			return false
		}
		old := policy.MaxAge > 0 && now.Sub(mod) > policy.MaxAge
		big := policy.MaxBytes > 0 && logEnd-base > policy.MaxBytes
		return old || big
	})
}

// dropFront deletes segments from the front while drop says so, oldest
// first, so a crash half way leaves a contiguous log. Readers positioned
// at or after the new start are not disturbed.
func (l *Log) dropFront(drop func(base, end, logEnd int64, mod time.Time) bool) (int, int64, error) {
	if l.closed {
		return 0, 0, ErrClosed
	}
	n := 0
	for n+1 < len(l.segs) {
		s := l.segs[n]
		fi, err := s.file.Stat()
		if err != nil {
			return 0, 0, err
		}
		if !drop(s.base, l.segs[n+1].base, l.end, fi.ModTime()) {
			break
		}
		n++
	}
	if n == 0 {
		return 0, 0, nil
	}
	gone := l.segs[:n]
	l.mu.Lock()
	l.segs = slices.Clone(l.segs[n:])
	l.mu.Unlock()
	l.unsynced = slices.DeleteFunc(l.unsynced, func(s *segment) bool { return slices.Contains(gone, s) })
	bytes := l.segs[0].base - gone[0].base
	for _, s := range gone {
		if err := s.remove(); err != nil && !os.IsNotExist(err) {
			return 0, 0, err
		}
	}
	return n, bytes, syncDir(l.dir)
}

// ResetAt empties the partition and starts its log at offset: a replica
// whose leader has deleted the data the replica lacks takes the leader's log
// from its start (a full sync). The commit log goes first, so a crash half
// way leaves nothing committed over a partial log, which a restart cuts.
func (p *Partition) ResetAt(offset int64) error {
	if p.closed {
		return ErrClosed
	}
	if err := p.Commits.TruncateTo(0); err != nil {
		return err
	}
	if err := p.Commits.Sync(); err != nil {
		return err
	}
	if err := p.Log.resetAt(offset); err != nil {
		return err
	}
	p.unsynced = 0
	return p.Sync()
}

// resetAt removes every segment, newest first, and starts an empty one at
// offset.
func (l *Log) resetAt(offset int64) error {
	if l.closed {
		return ErrClosed
	}
	if offset < 0 {
		return fmt.Errorf("storage: reset log to negative offset %d", offset)
	}
	old := l.segs
	for i := len(old) - 1; i >= 0; i-- {
		if err := old[i].remove(); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	s, err := openSegment(l.fs, l.dir, offset, os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.segs, l.end = []*segment{s}, offset
	l.mu.Unlock()
	l.unsynced = nil
	l.dirDirty = true
	return syncDir(l.dir)
}
