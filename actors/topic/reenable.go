package topic

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A leader that failed a write rolled it back and disabled its writes, so
// no write it cannot stand behind is acknowledged. It takes writes again
// only through a new epoch in the partition's metadata: if the controller
// has moved leadership meanwhile, that change fails and the role change
// that follows makes this node a follower instead. Followers that applied a
// write the leader rolled back cut it when the next write arrives.

// metadataTimeout bounds every change a partition actor asks of the
// metadata (ISR shrink and join, writes disabled and re-enabled), so an
// unreachable etcd fails the change instead of leaving it pending.
const metadataTimeout = 5 * time.Second

type reenableDue struct{}

type disabledStored struct{}

type reenabled struct {
	role Role
	err  error
}

// reenableAfter is how long a leader waits after disabling writes before
// trying to take them again: at least the time a follower is given to ack.
func (a *Actor) reenableAfter() time.Duration {
	return max(a.opt.Writer.ShrinkAfter, 200*time.Millisecond)
}

// writesDisabled records the disabled writes in the metadata, so lookups
// for writing leave the partition out, and then schedules re-enabling.
func (a *Actor) writesDisabled(ctx actor.Context) {
	if a.opt.Disabled == nil {
		a.reenableLater(ctx)
		return
	}
	self, root, disabled := ctx.Self(), ctx.ActorSystem().Root, a.opt.Disabled
	go func() {
		c, cancel := context.WithTimeout(context.Background(), metadataTimeout)
		defer cancel()
		if err := disabled(c); err != nil {
			a.opt.Logger.Warn("recording writes disabled", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		}
		root.Send(self, &disabledStored{})
	}()
}

func (a *Actor) reenableLater(ctx actor.Context) {
	if a.opt.Reenable == nil || a.reenabling {
		return
	}
	a.reenabling = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(a.reenableAfter(), func() { root.Send(self, &reenableDue{}) })
}

func (a *Actor) reenable(ctx actor.Context) {
	if !a.leads() || a.writer.Writable() {
		a.reenabling = false
		return
	}
	now, followers := a.opt.Now(), a.writer.Followers()
	if len(a.progress.DownAmong(followers, now)) > 0 {
		// The next write would fail the same way. With a majority left
		// without them, the followers down for --isr-shrink-after leave
		// the ISR first (a dead one would otherwise keep the writes
		// disabled until it came back, and one merely redialling gets the
		// time a slow follower gets); otherwise wait for their streams.
		long := a.progress.DownAmong(followers, now.Add(-a.opt.Writer.ShrinkAfter))
		a.reenabling = false
		a.perform(ctx, a.writer.ShrinkDown(long))
		a.reenableLater(ctx)
		return
	}
	self, root, reenable := ctx.Self(), ctx.ActorSystem().Root, a.opt.Reenable
	go func() {
		c, cancel := context.WithTimeout(context.Background(), metadataTimeout)
		defer cancel()
		role, err := reenable(c)
		root.Send(self, &reenabled{role: role, err: err})
	}()
}

func (a *Actor) reenabled(ctx actor.Context, m *reenabled) {
	a.reenabling = false
	if m.err != nil {
		a.opt.Logger.Warn("re-enabling writes", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", m.err)
		if a.leads() && !a.writer.Writable() {
			a.reenableLater(ctx)
		}
		return
	}
	if m.role.EpochForWrite < a.role.EpochForWrite {
		return
	}
	a.applyRole(ctx, m.role)
	if a.leads() {
		a.writer.Enable()
		a.opt.Logger.Info("writes re-enabled", "topic", a.opt.Topic, "partition", a.opt.Partition, "epoch_for_write", m.role.EpochForWrite)
	}
}
