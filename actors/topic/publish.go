package topic

import "github.com/asynkron/protoactor-go/actor"

// DelayedCopy says a publish is the copy of a message one channel REQ'd with
// a long delay (docs/replication.md#delayed-copy): the copy goes into the
// partition log with its delivery time, so it is replicated and survives
// restarts like any write, and only the named channel delivers it.
type DelayedCopy struct {
	Channel  string
	OrigID   uint64
	Attempts uint16
}

// published queues a publish and makes sure a flush follows every publish
// already in the mailbox: that is group commit.
func (a *Actor) published(ctx actor.Context, m *Published) {
	if !a.leads() {
		m.Reply(Reply{Err: ErrLedElsewhere})
		return
	}
	if m.Here != nil {
		a.here = m.Here
	}
	if r := a.writer.Offer(Publish{Bodies: m.Bodies, DeliverAt: m.DeliverAt, Token: m.Reply, ReceivedAt: a.opt.Now(), Traces: m.Traces, Headers: m.Headers, IDs: m.IDs, Delayed: m.Delayed, Deadline: m.Deadline, SeenEpoch: m.SeenEpoch}); r != nil {
		m.Reply(*r)
		return
	}
	a.flushSoon(ctx)
}

// flushSoon queues a flush behind every message in the mailbox, unless
// one is queued already: that is group commit.
func (a *Actor) flushSoon(ctx actor.Context) {
	if !a.flushing {
		a.flushing = true
		ctx.Send(ctx.Self(), &flushWrites{})
	}
}

func (a *Actor) flush(ctx actor.Context) {
	for {
		now := a.opt.Now()
		if refused := a.writer.Expire(now); len(refused) > 0 {
			a.perform(ctx, Ready{Replies: refused})
		}
		w := a.writer.NextWrite(now)
		if w == nil {
			return
		}
		a.writeStarted(w)
		_, err := a.opt.Store.Log.Append(w.Data)
		if err != nil || a.opt.Store.SyncErr() == nil {
			// A write into the page cache says nothing of a failing fsync.
			a.diskHealth(err)
		}
		r := a.writer.LocalWritten(w.Record.LogID, err)
		if err == nil && len(r.Sends) == 0 && len(a.role.Catchup) > 0 {
			// No follower in sync to send it to, which is where replicas
			// catching up get their copy.
			a.sendToCatchup(ctx, a.replicaWrite(w.Record.Epoch, w.Record, w.Prev, w.Data))
		}
		a.perform(ctx, r)
	}
}

// flushDue: the flush a publish queued reached the front of the mailbox,
// behind every publish that was in it.
func (a *Actor) flushDue(ctx actor.Context) {
	a.flushing = false
	a.flush(ctx)
}
