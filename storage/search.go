package storage

import (
	"errors"
	"fmt"
	"sort"
)

// Searches over the committed log, through the commit log: a binary search
// over commit records finds the record, then its messages are read to land
// on an exact message boundary. Only committed, retained records are
// searched. A search belongs to the partition actor, as the commit log it
// reads does.

// SearchMode says what a search position means.
type SearchMode int

const (
	// ByID: the message with this ID.
	ByID SearchMode = iota
	// ByCount: the message with this many messages before it in the
	// partition (0 is the first message ever published).
	ByCount
	// ByOffset: the message holding this virtual byte offset.
	ByOffset
	// ByTime: the first message published at or after this time (unix
	// nanoseconds).
	ByTime
)

// ErrNotFound: no committed, retained message matches the search.
var ErrNotFound = errors.New("storage: no such message")

// Located is a message a search found.
type Located struct {
	StoredMessage
	Count int64 // messages before it in the partition
}

// Locate finds one committed message.
func (p *Partition) Locate(mode SearchMode, pos int64) (Located, error) {
	lo, hi, err := p.retainedRecords()
	if err != nil {
		return Located{}, err
	}
	var firstErr error
	rec := func(i int) CommitRecord {
		r, err := p.Commits.Record(int64(i))
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return r
	}
	var i int
	switch mode {
	case ByID:
		i = sort.Search(hi-lo, func(k int) bool { return rec(lo+k).LastMsgLogID >= pos }) + lo
	case ByCount:
		i = sort.Search(hi-lo, func(k int) bool { return rec(lo+k).LastCount() > pos }) + lo
	case ByOffset:
		i = sort.Search(hi-lo, func(k int) bool { return rec(lo+k).End() > pos }) + lo
	case ByTime:
		return p.locateTime(lo, hi, pos)
	default:
		return Located{}, fmt.Errorf("storage: unknown search mode %d", mode)
	}
	if firstErr != nil {
		return Located{}, firstErr
	}
	if i >= hi {
		return Located{}, ErrNotFound
	}
	msgs, r, err := p.recordMessages(int64(i))
	if err != nil {
		return Located{}, err
	}
	for k, m := range msgs {
		l := Located{StoredMessage: m, Count: r.MsgCnt - 1 + int64(k)}
		switch {
		case mode == ByID && int64(m.ID) == pos,
			mode == ByCount && l.Count == pos,
			mode == ByOffset && m.Offset <= pos && pos < m.Offset+int64(m.Size):
			return l, nil
		}
	}
	return Located{}, ErrNotFound
}

// locateTime finds the first message stamped at or after t. Timestamps grow
// along the log (a record's messages share one), so the record is found by
// its first message.
func (p *Partition) locateTime(lo, hi int, t int64) (Located, error) {
	var firstErr error
	i := sort.Search(hi-lo, func(k int) bool {
		msgs, _, err := p.recordMessages(int64(lo + k))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return true
		}
		return msgs[0].Timestamp >= t
	}) + lo
	if firstErr != nil {
		return Located{}, firstErr
	}
	// The record before may hold later-stamped messages (a leader whose
	// clock is behind); look there first.
	for _, j := range []int{i - 1, i} {
		if j < lo || j >= hi {
			continue
		}
		msgs, r, err := p.recordMessages(int64(j))
		if err != nil {
			return Located{}, err
		}
		for k, m := range msgs {
			if m.Timestamp >= t {
				return Located{StoredMessage: m, Count: r.MsgCnt - 1 + int64(k)}, nil
			}
		}
	}
	return Located{}, ErrNotFound
}

// Seek finds the message boundary a channel would start at to deliver the
// message a search finds: positions before the retained log start at its
// first message, positions past the committed end land at the end.
func (p *Partition) Seek(mode SearchMode, pos int64) (offset, count int64, err error) {
	l, err := p.Locate(mode, pos)
	if err == nil {
		return l.Offset, l.Count, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return 0, 0, err
	}
	lo, hi, err := p.retainedRecords()
	if err != nil {
		return 0, 0, err
	}
	end, count := p.Committed()
	if lo < hi {
		first, err := p.Commits.Record(int64(lo))
		if err != nil {
			return 0, 0, err
		}
		before := false
		switch mode {
		case ByID:
			before = pos < first.LogID
		case ByCount:
			before = pos < first.MsgCnt-1
		case ByOffset:
			before = pos < first.MsgOffset
		}
		if before {
			return first.MsgOffset, first.MsgCnt - 1, nil
		}
	}
	return end, count, nil
}

// retainedRecords is the index range of the commit records whose messages
// are still in the log.
func (p *Partition) retainedRecords() (lo, hi int, err error) {
	n := int(p.Commits.Count())
	start := p.Log.Start()
	var firstErr error
	lo = sort.Search(n, func(i int) bool {
		r, err := p.Commits.Record(int64(i))
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return true
		}
		return r.MsgOffset >= start
	})
	return lo, n, firstErr
}

// recordMessages reads the messages of commit record i.
func (p *Partition) recordMessages(i int64) ([]StoredMessage, CommitRecord, error) {
	r, err := p.Commits.Record(i)
	if err != nil {
		return nil, r, err
	}
	msgs, _, err := p.Log.ReadMessages(r.MsgOffset, r.End(), make([]byte, r.MsgSize))
	if err != nil {
		return nil, r, err
	}
	if len(msgs) != int(r.MsgNum) {
		return nil, r, fmt.Errorf("%w: record %d holds %d messages, read %d", ErrCorruptMessage, r.LogID, r.MsgNum, len(msgs))
	}
	return msgs, r, nil
}
