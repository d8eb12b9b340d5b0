package channel

import (
	"container/heap"
	"slices"
	"time"

	"github.com/partitamq/partita/storage"
)

// Long delays go to the partition's log (docs/replication.md#delayed-copy).
// A REQ longer than Config.ReqToEndThreshold is not held in memory: the
// message is copied into the log with its delivery time, a new ID, its
// original ID, its attempts and this channel's name, replicated like any
// write; once the copy is committed the original is confirmed. The copy is
// then an ordinary deferred log message that only this channel delivers, so
// it survives restarts and failover, and no separate store is needed.

// DelayMove is a message on its way into the log as a delayed copy.
type DelayMove struct {
	ID        uint64
	Body      []byte
	Header    []byte
	Attempts  uint16
	DeliverAt int64 // unix nanos
}

// MovesToLog says whether a REQ with this delay goes to the log.
func (c *Core) MovesToLog(delay time.Duration) bool {
	return c.cfg.ReqToEndThreshold > 0 && delay > c.cfg.ReqToEndThreshold && !c.ordered && c.cfg.Name != ""
}

// ReqToLog takes a REQ'd message out of flight and holds it until its copy
// is committed (Moved) or could not be written (MoveFailed). It reports
// false, with nothing to copy, for a message the channel no longer wants
// back since a setoffset (wanted): a copy would deliver it again; and for
// one that had its last delivery, which is dead instead (dead.go).
func (c *Core) ReqToLog(consumer int64, id uint64, delay time.Duration, now time.Time) (DelayMove, bool, error) {
	e, err := c.owned(consumer, id)
	if err != nil {
		return DelayMove{}, false, err
	}
	c.takeBack(e)
	c.requeueCount++
	if !c.wanted(e) {
		return DelayMove{}, false, nil
	}
	if c.exhausted(e) {
		c.bury(e, now.UnixNano())
		return DelayMove{}, false, nil
	}
	e.due = now.Add(delay).UnixNano()
	if c.moving == nil {
		c.moving = make(map[uint64]*entry)
	}
	c.moving[id] = e
	return DelayMove{ID: id, Body: e.body, Header: e.header(), Attempts: e.attempts, DeliverAt: e.due}, true, nil
}

// Moved: the delayed copy of id is committed, so the original is confirmed.
func (c *Core) Moved(id uint64) {
	e, ok := c.moving[id]
	if !ok {
		return
	}
	delete(c.moving, id)
	c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
	c.advanceConfirmed()
}

// MoveFailed: the copy could not be written (this node stopped leading, or
// the write failed); the message waits in memory instead, as a short REQ
// does, and is delivered at its time unless the channel moves first, or
// has moved meanwhile so that it no longer wants it from memory.
func (c *Core) MoveFailed(id uint64) {
	e, ok := c.moving[id]
	if !ok {
		return
	}
	delete(c.moving, id)
	if c.wanted(e) {
		heap.Push(&c.deferred, e)
	}
}

// skipsDelayedCopy says whether a log message is another channel's
// delayed copy, which this channel confirms without delivering.
func (c *Core) skipsDelayedCopy(m *storage.StoredMessage) bool {
	return m.DelayedChannel != "" && m.DelayedChannel != c.cfg.Name
}

// youzan's /channel/emptydelayed and /channel/requeuedelayed act on what
// the channel holds deferred: REQ'd with a delay, published with one
// (DPUB), or a delayed copy read back from the log, parked or not. A
// message whose copy is still being written (moving) is not among them:
// it is deferred once its copy is read back. A delayed message the cursor
// has not read yet, behind a backlog, is not either.

// EmptyDeferred drops every deferred message, confirming each so that it
// is not delivered again, here or, once the confirmed state is
// replicated, on a new leader; it returns how many it dropped.
func (c *Core) EmptyDeferred() int {
	dropped := append(slices.Clone([]*entry(c.deferred)), c.parked...)
	dropped = append(dropped, c.unparked...)
	c.deferred, c.parked, c.unparked = nil, nil, nil
	for _, e := range dropped {
		c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
	}
	c.advanceConfirmed()
	c.deferredEmptied += int64(len(dropped))
	return len(dropped)
}

// DeferredDue makes the deferred messages due by until (unix nanos) due
// now, first among what waits, and returns how many; parked ones are
// delivered once the shell has read their bodies (WantBody).
func (c *Core) DeferredDue(until int64) int {
	n := 0
	for c.deferred.Len() > 0 && c.deferred[0].due <= until {
		c.requeued = append(c.requeued, heap.Pop(&c.deferred).(*entry))
		n++
	}
	for c.parked.Len() > 0 && c.parked[0].due <= until {
		c.unparked = append(c.unparked, heap.Pop(&c.parked).(*entry))
		n++
	}
	return n
}
