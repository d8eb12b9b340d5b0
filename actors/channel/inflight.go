package channel

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A consumer answers each message handed to it with FIN, REQ or TOUCH, or
// lets it time out. An answer the channel refuses (a FIN of a message not
// in flight, say) is reported to that consumer, non-fatally as in nsqd.

// finished: a FIN. An ordered channel then delivers nothing until the
// partition has the new offset on every ISR member (orderedSynced).
func (a *Actor) finished(ctx actor.Context, m *Finished) {
	// The publish time is looked up only where the latency is tracked: a
	// FIN costs nothing more otherwise.
	var published int64
	tracked := false
	if a.e2e != nil {
		published, tracked = a.core.Timestamp(m.ConsumerID, m.ID)
	}
	if err := a.core.Fin(m.ConsumerID, m.ID); err != nil {
		a.refuse(m.ConsumerID, m.Out, "FIN", m.ID, err)
		return
	}
	if tracked {
		now := a.opt.Now()
		a.e2e.Observe(now.Sub(time.Unix(0, published)), now)
	}
	a.released(ctx, m.ConsumerID, 1)
	if a.core.Ordered() && a.opt.Dir != "" {
		a.upkeep.Confirmed(a.opt.Now())
		a.syncing = true
		st := a.core.State()
		ctx.Send(ctx.Parent(), &OrderedFinished{Channel: a.opt.Name, ConsumerID: m.ConsumerID, ID: m.ID,
			Out: a.outOf(m.ConsumerID, m.Out), Update: OffsetUpdate{Offset: st.Confirmed, Count: st.ConfirmedCount}})
		return
	}
	a.moved()
	a.deliverSoon(ctx)
}

// finishAsked finishes a message for whichever consumer holds it, as its
// FIN would (an ordered channel syncs the offset first); one waiting for
// its next delivery is finished where it waits.
func (a *Actor) finishAsked(ctx actor.Context, m *FinishAsked) {
	if consumer, ok := a.core.Holder(m.ID); ok {
		a.finished(ctx, &Finished{ConsumerID: consumer, ID: m.ID})
		m.Reply(nil)
		return
	}
	if err := a.core.FinWaiting(m.ID); err != nil {
		m.Reply(err)
		return
	}
	a.moved()
	a.deliverSoon(ctx)
	m.Reply(nil)
}

// orderedSynced: the partition has the ordered FIN's offset on every ISR
// member, or says why not; delivery goes on either way.
func (a *Actor) orderedSynced(ctx actor.Context, m *OrderedSynced) {
	a.syncing = false
	if m.Err != nil {
		a.refuse(m.ConsumerID, m.Out, "FIN", m.ID, m.Err)
	} else {
		a.sentOffset = a.core.State().Confirmed
	}
	a.deliverSoon(ctx)
}

func (a *Actor) requeued(ctx actor.Context, m *Requeued) {
	if a.core.MovesToLog(m.Delay) && ctx.Parent() != nil {
		a.reqToLog(ctx, m)
		return
	}
	if err := a.core.Req(m.ConsumerID, m.ID, m.Delay, a.opt.Now()); err != nil {
		a.refuse(m.ConsumerID, m.Out, "REQ", m.ID, err)
		return
	}
	a.released(ctx, m.ConsumerID, 1)
	a.deliverSoon(ctx)
}

// reqToLog hands a long-delayed REQ to the partition to be copied into the
// log; the consumer's window slot is free at once, as for any REQ.
func (a *Actor) reqToLog(ctx actor.Context, m *Requeued) {
	mv, moving, err := a.core.ReqToLog(m.ConsumerID, m.ID, m.Delay, a.opt.Now())
	if err != nil {
		a.refuse(m.ConsumerID, m.Out, "REQ", m.ID, err)
		return
	}
	a.released(ctx, m.ConsumerID, 1)
	if moving {
		ctx.Send(ctx.Parent(), &DelayRequested{Channel: a.opt.Name, Move: mv, Reply: ctx.Self()})
	}
	a.deliverSoon(ctx)
}

// delayStored: the partition wrote a long REQ's copy into the log, or
// could not, and the message waits in memory instead.
func (a *Actor) delayStored(ctx actor.Context, m *DelayStored) {
	if m.Err != nil {
		a.opt.Logger.Warn("delayed REQ kept in memory", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "err", m.Err)
		a.core.MoveFailed(m.ID)
		return
	}
	a.core.Moved(m.ID)
	a.moved()
	a.deliverSoon(ctx)
}

func (a *Actor) touched(m *Touched) {
	c := a.consumer(m.ConsumerID)
	timeout := time.Duration(0)
	if c != nil {
		timeout = c.MsgTimeout
	}
	if err := a.core.Touch(m.ConsumerID, m.ID, a.opt.Now(), timeout); err != nil {
		a.refuse(m.ConsumerID, m.Out, "TOUCH", m.ID, err)
	}
}
