package channel

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A channel reads the committed log ahead of its consumers and hands
// messages out round-robin, each consumer within its RDY window.

// committed: the partition committed more of the log.
func (a *Actor) committed(ctx actor.Context, m *Committed) {
	a.core.CommittedTo(m.End, m.Count)
	if a.core.Skipped() {
		a.moved() // dropped as it came: the confirmed position moved
		return
	}
	a.deliverSoon(ctx)
}

// deliverSoon delivers after every message already in the mailbox: a burst
// of FINs then refills the consumers' windows in one batch instead of one
// message at a time.
func (a *Actor) deliverSoon(ctx actor.Context) {
	if !a.deliverQueued {
		a.deliverQueued = true
		ctx.Send(ctx.Self(), &deliverDue{})
	}
}

// deliveryDue: the delivery deliverSoon queued reached the front of the
// mailbox.
func (a *Actor) deliveryDue(ctx actor.Context) {
	a.deliverQueued = false
	a.deliver(ctx)
}

// deliver reads ahead and hands messages to consumers round-robin while any
// has room.
func (a *Actor) deliver(ctx actor.Context) {
	if a.syncing {
		return
	}
	now := a.opt.Now()
	for {
		a.readAhead(now)
		if a.core.Available() == 0 || len(a.consumers) == 0 || a.core.RateHeld(now) {
			break
		}
		gave := false
		for i := 0; i < len(a.consumers) && a.core.Available() > 0 && !a.core.RateHeld(now); i++ {
			c := a.consumers[(a.next+i)%len(a.consumers)]
			want := a.core.Available()
			if len(a.consumers) > 1 {
				want = max(1, want/len(a.consumers))
			}
			n := c.reserve(want)
			if n == 0 {
				continue
			}
			filtered := a.core.Filtered()
			ds := a.core.Take(c.ID, n, now, c.MsgTimeout)
			// Room taken and not used goes back, waking the channels that
			// found the window full while this one held it.
			a.released(ctx, c.ID, n-len(ds))
			if a.core.Filtered() != filtered {
				// Confirmed by the consumer's filter: the channel moved and
				// what follows may be for this consumer.
				a.moved()
				gave = true
			}
			if len(ds) > 0 {
				c.Out.Deliver(a.opt.Topic, a.opt.Partition, ds)
				gave = true
			}
		}
		a.next++
		if !gave {
			break
		}
	}
}

// readBuffers lend channels the buffer a read of the log fills. The core
// copies what it keeps, so a buffer goes back after each read-ahead:
// thousands of channel actors share a few of them instead of holding a
// quarter megabyte each while idle.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, readBufferSize); return &b }}

// readBufferSize is what one read of the log takes at most.
const readBufferSize = 256 << 10

// reader holds a borrowed read buffer from the first read of a
// read-ahead to its end; a read-ahead with nothing to read borrows none.
type reader struct{ buf *[]byte }

func (r *reader) bytes() []byte {
	if r.buf == nil {
		r.buf = readBuffers.Get().(*[]byte)
	}
	return *r.buf
}

func (r *reader) done() {
	if r.buf != nil {
		readBuffers.Put(r.buf)
		r.buf = nil
	}
}

func (a *Actor) readAhead(now time.Time) {
	var r reader
	defer r.done()
	a.readBodies(&r)
	for {
		from, to, ok := a.core.WantRead()
		if !ok {
			return
		}
		msgs, _, err := a.opt.Log.ReadMessages(from, to, r.bytes())
		if err != nil {
			a.opt.Logger.Error("reading partition log", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "offset", from, "err", err)
			return
		}
		if len(msgs) == 0 {
			return
		}
		a.core.Loaded(msgs, now)
	}
}

// readBodies reads the bodies of parked messages that came due.
func (a *Actor) readBodies(r *reader) {
	for {
		off, size, ok := a.core.WantBody()
		if !ok {
			return
		}
		msgs, _, err := a.opt.Log.ReadMessages(off, off+int64(size), r.bytes())
		if err != nil || len(msgs) == 0 {
			a.opt.Logger.Error("reading a delayed message", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "offset", off, "err", err)
			a.core.BodyLoaded(nil)
			continue
		}
		a.core.BodyLoaded(&msgs[0])
	}
}
