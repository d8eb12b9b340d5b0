package topic

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
)

// Followers a write cannot wait for (failed, or silent past
// --isr-shrink-after once a majority acked) leave the ISR: the Writer asks
// (Ready.ShrinkISR), the metadata records the smaller ISR, and only then do
// the writes waiting on them commit. The dropped followers go on as
// replicas catching up.

type isrShrunk struct {
	role Role
	err  error
}

// shrinkISR asks the metadata to drop followers, off the actor's goroutine.
func (a *Actor) shrinkISR(ctx actor.Context, remove []string) {
	if a.opt.ShrinkISR == nil {
		ctx.Send(ctx.Self(), &isrShrunk{err: errNoMetadata})
		return
	}
	self, root, shrink := ctx.Self(), ctx.ActorSystem().Root, a.opt.ShrinkISR
	go func() {
		c, cancel := context.WithTimeout(context.Background(), metadataTimeout)
		defer cancel()
		role, err := shrink(c, remove)
		root.Send(self, &isrShrunk{role: role, err: err})
	}()
}

type topicError string

func (e topicError) Error() string { return string(e) }

const errNoMetadata = topicError("no partition metadata to change")

func (a *Actor) shrunk(ctx actor.Context, m *isrShrunk) {
	if m.err != nil {
		a.opt.Logger.Warn("shrinking ISR", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", m.err)
		a.perform(ctx, a.writer.ISRShrunk(m.err))
		return
	}
	a.opt.Observer.ISRShrunk(a.opt.Topic, a.opt.Partition, len(a.role.ISR)-len(m.role.ISR))
	if m.role.Revision >= a.role.Revision {
		a.role = m.role // what the watch will bring: older states must not undo it
		a.progress.SetRole(a.role.followersOf(a.opt.Node), a.role.Catchup)
	}
	a.perform(ctx, a.writer.ISRShrunk(nil))
	a.syncsOnly(ctx, a.offsetMembers())
	// Removed followers are catching up now: their replica actors stay.
	a.opt.Logger.Info("ISR shrunk", "topic", a.opt.Topic, "partition", a.opt.Partition, "isr", m.role.ISR)
}
