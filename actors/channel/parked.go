package channel

import (
	"container/heap"
	"time"

	"github.com/partitamq/partita/storage"
)

// Parking: a log message due further ahead than ReqToEndThreshold (a long
// DPUB, or a delayed REQ's copy) is held without its body and does not
// count against MaxOutstanding, so a channel with many messages delayed by
// days keeps reading and delivering what is due now, and holds only a small
// entry per delayed message. When one comes due the shell reads its body
// back from the log (WantBody, BodyLoaded).

// parks says whether a log message due at due is parked.
func (c *Core) parks(due int64, now time.Time) bool {
	return c.cfg.ReqToEndThreshold > 0 && due-now.UnixNano() > int64(c.cfg.ReqToEndThreshold)
}

// unpark moves parked messages that are due to the list waiting for their
// bodies.
func (c *Core) unpark(nowNs int64) {
	for c.parked.Len() > 0 && c.parked[0].due <= nowNs {
		c.unparked = append(c.unparked, heap.Pop(&c.parked).(*entry))
	}
}

// WantBody names the log record of a due parked message whose body the
// shell should read, if any.
func (c *Core) WantBody() (offset int64, size int32, ok bool) {
	if len(c.unparked) == 0 {
		return 0, 0, false
	}
	e := c.unparked[0]
	return e.offset, e.size, true
}

// BodyLoaded gives a due parked message its body, making it deliverable.
// A record that could not be read is dropped from memory; it is delivered
// again after a restart, as it is not confirmed.
func (c *Core) BodyLoaded(m *storage.StoredMessage) {
	if len(c.unparked) == 0 {
		return
	}
	e := c.unparked[0]
	c.unparked = c.unparked[1:]
	if m == nil || m.Offset != e.offset {
		return
	}
	e.body = append([]byte(nil), m.Body...)
	e.setHeader(m.Header)
	c.requeued = append(c.requeued, e)
}

// dropParked forgets parked messages; the cursor reads them again.
func (c *Core) dropParked() {
	c.parked, c.unparked = nil, nil
}
