package topic

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Retention (--retention-days, or the topic's own retention days, and
// --retention-bytes) deletes whole segments
// from the front of the log, and only those every channel has confirmed:
// a channel's saved state is read from disk, and that state is never ahead
// of the channel, so nothing a channel may still deliver is deleted. Each
// replica applies it to its own log with its own (replicated) channel
// offsets. Ephemeral channels do not hold data back.

// settingsChanged applies a topic's new fsync count and retention. The
// timer is rearmed after every message, so a retention now due runs at
// the next wake.
func (a *Actor) settingsChanged(ctx actor.Context, m *SettingsChanged) {
	a.opt.Store.SetSyncEvery(m.SyncEvery)
	a.opt.Retention = m.Retention
	a.opt.Dedupe = m.Dedupe
	a.applyDedupe()
	if a.leads() && a.writer.Waiting() > 0 {
		// Publishes that waited on IDs when the window was turned off.
		a.flushSoon(ctx)
	}
}

// retainDue runs retention when its interval has passed.
func (a *Actor) retainDue(now time.Time) {
	p := a.opt.Retention
	if a.opt.Dir == "" || (p.MaxAge <= 0 && p.MaxBytes <= 0) {
		return
	}
	if now.Sub(a.retainedAt) < a.retentionEvery() {
		return
	}
	a.retainedAt = now
	limit, ok := a.retentionLimit()
	if !ok {
		return
	}
	n, bytes, err := a.opt.Store.Retain(p, limit, now)
	if err != nil {
		a.opt.Logger.Error("retention", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		return
	}
	if n > 0 {
		a.opt.Logger.Info("retention deleted segments", "topic", a.opt.Topic, "partition", a.opt.Partition,
			"segments", n, "bytes", bytes, "log_start", a.opt.Store.Log.Start())
	}
}

func (a *Actor) retentionEvery() time.Duration {
	if a.opt.RetentionEvery <= 0 {
		return time.Minute
	}
	return a.opt.RetentionEvery
}

// retentionLimit is the smallest offset a channel has confirmed and saved.
// A channel without a saved state yet holds retention back this round.
func (a *Actor) retentionLimit() (int64, bool) {
	limit, _ := a.opt.Store.Committed()
	if len(a.channels) == 0 {
		// Kept for the topic's first channel, as nsqd keeps it.
		limit = min(limit, a.firstStart)
	}
	names, err := a.opt.States.List(a.opt.Dir)
	if err != nil {
		return 0, false
	}
	for name := range a.channels {
		if !IsEphemeral(name) {
			names = append(names, name)
		}
	}
	for _, name := range names {
		st, found, err := a.opt.States.Load(a.opt.Dir, name)
		if err != nil || !found {
			return 0, false
		}
		limit = min(limit, st.Confirmed)
	}
	return limit, true
}
