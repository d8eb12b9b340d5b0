package channel

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Consumer is one subscribed client connection as channel actors see it. The
// session owns its RDY window across every partition it consumes; channel
// actors take room in the window before they hand over messages, so the
// connection never holds more than RDY messages in flight.
type Consumer struct {
	ID         int64
	MsgTimeout time.Duration
	Out        Outbox
	// Select is the consumer's tag and filter on an ext topic (select.go).
	Select Selector
	// ClientID (IDENTIFY's client_id, else the remote host) and Addr (the
	// remote address, host:port) are what the channel's client limits
	// match (clientlimit.go).
	ClientID string
	Addr     string

	// The window is the one deliberate exception to actors keeping their
	// state to themselves: the session and the channel actors share it
	// through these atomics instead of messages. One RDY spans every
	// partition the connection consumes, and each partition's channel actor
	// delivers on its own goroutine while the session sets RDY on another.
	// Kept by the session alone, every delivery would first ask it for
	// room and wait for the answer: a round trip through the session on
	// the hot path of every partition. Instead reserve takes room with a
	// compare-and-swap of inFlight against rdy, so all partitions together
	// never exceed RDY, and a channel that finds no room marks the window
	// starved; whoever gives room back to a starved window wakes the
	// others listed in channels. Only a starved window wakes anyone: room
	// given back that no channel waited for (two ordered channels taking
	// and returning the one free slot, neither able to deliver) would
	// otherwise have them wake each other for ever.
	rdy      atomic.Int64
	inFlight atomic.Int64
	starved  atomic.Bool
	channels atomic.Pointer[[]*actor.PID]
	// limit is one more than the cap the channel's client limits put on
	// the window, 0 for none. The channel actors of every partition set
	// it from the same rules.
	limit atomic.Int64
}

// Outbox is how channel actors reach the connection. Its methods must not
// block: they run on channel actors' goroutines.
type Outbox interface {
	Deliver(topic string, partition int32, ds []Delivery)
	Refused(cmd string, id uint64, err error)
	ChannelGone()
}

// SetRDY sets the window; it reports whether there is room now.
func (c *Consumer) SetRDY(n int64) bool {
	c.rdy.Store(n)
	return c.inFlight.Load() < c.window()
}

// RDY is the current window.
func (c *Consumer) RDY() int64 { return c.rdy.Load() }

// InFlight is the number of messages delivered and not yet answered.
func (c *Consumer) InFlight() int64 { return c.inFlight.Load() }

// Full reports whether the window is closed.
func (c *Consumer) Full() bool { return c.inFlight.Load() >= c.window() }

// Limit is the cap the channel's client limits put on the window; ok is
// false when none does.
func (c *Consumer) Limit() (ready int64, ok bool) {
	l := c.limit.Load()
	return l - 1, l > 0
}

// setLimit caps the window at ready, or lifts the cap.
func (c *Consumer) setLimit(ready int64, ok bool) {
	if !ok {
		c.limit.Store(0)
		return
	}
	c.limit.Store(ready + 1)
}

// window is RDY under the cap of the client limits.
func (c *Consumer) window() int64 {
	w := c.rdy.Load()
	if l, ok := c.Limit(); ok {
		w = min(w, l)
	}
	return w
}

// SetChannels records the channel actors this consumer is subscribed to, so
// one of them can wake the others when room comes back to a starved window.
func (c *Consumer) SetChannels(pids []*actor.PID) { c.channels.Store(&pids) }

// Channels returns the channel actors this consumer is subscribed to.
func (c *Consumer) Channels() []*actor.PID {
	if p := c.channels.Load(); p != nil {
		return *p
	}
	return nil
}

// reserve takes up to n slots of the window and returns how many it took.
// Finding none, it marks the window starved before it looks a last time:
// a release after the mark sees it and wakes the others, and one before
// the last look left room that the look finds.
func (c *Consumer) reserve(n int) int {
	for {
		in := c.inFlight.Load()
		free := c.window() - in
		if free <= 0 {
			c.starved.Store(true)
			if c.window()-c.inFlight.Load() > 0 {
				continue
			}
			return 0
		}
		take := min(int64(n), free)
		if c.inFlight.CompareAndSwap(in, in+take) {
			return int(take)
		}
	}
}

// release gives n slots back and reports whether the channels that found
// the window full must be woken: it has room now, and some channel found
// none since the last wake-up.
func (c *Consumer) release(n int) (wake bool) {
	if n <= 0 {
		return false
	}
	after := c.inFlight.Add(-int64(n))
	return after < c.window() && c.starved.Swap(false)
}

// consumer finds a subscribed consumer; nil once it unsubscribed, though
// its messages may still be in flight.
func (a *Actor) consumer(id int64) *Consumer {
	for _, c := range a.consumers {
		if c.ID == id {
			return c
		}
	}
	return nil
}

func (a *Actor) removeConsumer(ctx actor.Context, id int64) {
	a.core.Select(id, Selector{})
	a.released(ctx, id, a.core.Gone(id, a.opt.Now()))
	for i, c := range a.consumers {
		if c.ID == id {
			a.consumers = append(a.consumers[:i], a.consumers[i+1:]...)
			return
		}
	}
}

// refuse tells the consumer its command failed: through its attachment
// here, or through out when it has left.
func (a *Actor) refuse(consumerID int64, out Outbox, cmd string, id uint64, err error) {
	if out = a.outOf(consumerID, out); out != nil {
		out.Refused(cmd, id, err)
	}
}

// outOf is the connection of consumer id, or out when it is not attached.
func (a *Actor) outOf(id int64, out Outbox) Outbox {
	if c := a.consumer(id); c != nil {
		return c.Out
	}
	return out
}

// released returns window slots to a consumer; if its window was starved, the
// other channels it consumes from are woken too.
func (a *Actor) released(ctx actor.Context, consumerID int64, n int) {
	c := a.consumer(consumerID)
	if c == nil || !c.release(n) {
		return
	}
	for _, pid := range c.Channels() {
		if !pid.Equal(ctx.Self()) {
			ctx.Send(pid, &WindowOpened{})
		}
	}
}

func (a *Actor) subscribed(ctx actor.Context, m *Subscribed) {
	a.consumers = append(a.consumers, m.Consumer)
	a.limit(m.Consumer)
	a.core.Select(m.Consumer.ID, m.Consumer.Select)
	a.deliver(ctx)
}

// limit caps a consumer's window as the channel's client limits say.
func (a *Actor) limit(c *Consumer) {
	c.setLimit(a.core.ClientLimit(c.ClientID, c.Addr))
}

// clientLimitsChanged: the channel's client limits changed; each
// consumer's cap follows, and a raised one takes more at once.
func (a *Actor) clientLimitsChanged(ctx actor.Context, m *ClientLimitsChanged) {
	a.core.SetClientLimits(m.Limits)
	for _, c := range a.consumers {
		a.limit(c)
	}
	a.deliverSoon(ctx)
}
