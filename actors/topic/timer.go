package topic

import (
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// After every message a partition actor works out the earliest time
// something falls due that no message will bring (a write's shrink or
// timeout, an ordered FIN's timeout, a join's wait, a resend to a follower,
// an fsync, retention) and keeps one time.AfterFunc timer for it, which
// holds no goroutine while it waits. With nothing due no timer is armed, so
// an idle partition costs no goroutine and no wake-up however many a node
// holds.

// wakeDue is the timer's message; gen tells a timer that was replaced
// after it had already fired.
type wakeDue struct{ gen uint64 }

// wakeTimer is the partition's one timer. Its time.Timer is made once and
// reset after, since a replicated write arms it and its commit disarms it:
// a new timer per write cost an allocation and a closure on every write. A
// fire that races a Reset may bring the new gen early; that wake finds
// nothing due and arms again.
type wakeTimer struct {
	t    *time.Timer
	at   time.Time // when t fires; zero while nothing is armed
	gen  uint64
	sent atomic.Uint64 // gen as the timer's goroutine reads it
	last time.Time     // when the last wake ran
}

// arm makes sure a wake comes at due or earlier. A timer already set for
// earlier is kept: it fires early, and the wake arms again for what is left.
func (w *wakeTimer) arm(ctx actor.Context, now, due time.Time) {
	if w.armed() && !due.Before(w.at) {
		return
	}
	w.gen++
	w.sent.Store(w.gen)
	w.at = due
	if w.t == nil {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		w.t = time.AfterFunc(max(due.Sub(now), 0), func() { root.Send(self, &wakeDue{gen: w.sent.Load()}) })
		return
	}
	w.t.Reset(max(due.Sub(now), 0))
}

// armed reports whether a wake is set; arm is never given a zero time.
func (w *wakeTimer) armed() bool { return !w.at.IsZero() }

func (w *wakeTimer) stop() {
	if w.armed() {
		w.t.Stop()
		w.at = time.Time{}
	}
}

// fired reports whether m is the armed timer's wake, and forgets the timer.
func (w *wakeTimer) fired(m *wakeDue) bool {
	if !w.armed() || m.gen != w.gen {
		return false
	}
	w.at = time.Time{}
	return true
}

// rearm arms the timer for the next deadline, or cancels it when nothing is
// due. Something still due at the last wake (an fsync that failed, an ISR
// shrink the metadata refused) is retried retryEvery later, not at once.
func (a *Actor) rearm(ctx actor.Context) {
	due := a.nextDeadline()
	if due.IsZero() {
		a.wakes.stop()
		return
	}
	if !a.wakes.last.IsZero() && !due.After(a.wakes.last) {
		due = a.wakes.last.Add(a.retryEvery())
	}
	a.wakes.arm(ctx, a.opt.Now(), due)
}

// nextDeadline is the earliest time something falls due, zero when nothing
// will without a message.
func (a *Actor) nextDeadline() time.Time {
	var due time.Time
	inFlight := 0
	if a.writer != nil {
		due, inFlight = a.writer.NextDeadline(), a.writer.InFlight()
	}
	return earliest(due, a.progress.NextDeadline(inFlight), a.syncsDeadline(), a.joinSyncDeadline(), a.fsyncDeadline(), a.retentionDeadline(), a.pushesDeadline())
}

// wake does what has fallen due.
func (a *Actor) wake(ctx actor.Context, now time.Time) {
	a.wakes.last = now
	a.perform(ctx, a.writer.Tick(now))
	a.continueJoin(ctx)
	for _, n := range a.progress.ResendsDue(now) {
		a.resend(ctx, n)
	}
	if a.leads() {
		for _, n := range a.progress.ProbesDue(now, a.writer.InFlight()) {
			a.probeCatchup(ctx, n)
		}
	}
	a.expireSyncs(ctx)
	a.expirePositions()
	a.expireJoinSync(ctx)
	a.resumePushes(ctx, now)
	a.retainDue(now)
	if a.opt.Store.SyncDue(now) {
		if err := a.opt.Store.Sync(); err != nil {
			a.opt.Logger.Error("fsync", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
			a.diskHealth(err)
		}
	}
}

// retryEvery paces what a wake could not settle: a quarter of the shortest
// of the write flow's timers and the fsync timeout, so each still happens
// within a quarter of its length of when it could.
func (a *Actor) retryEvery() time.Duration {
	d := a.opt.SyncTimeout / 4
	for _, t := range []time.Duration{a.opt.Writer.ShrinkAfter, a.opt.Writer.WriteTimeout} {
		if t > 0 {
			d = min(d, t/4)
		}
	}
	return max(d, 10*time.Millisecond)
}

// syncsDeadline is when the oldest ordered FIN or setoffset waiting for
// the followers, or a setoffset waiting for this node's save, times out.
func (a *Actor) syncsDeadline() time.Time {
	timeout := a.opt.Writer.WriteTimeout
	if timeout <= 0 {
		return time.Time{}
	}
	var due time.Time
	for _, s := range a.syncs {
		due = earliest(due, s.started.Add(timeout))
	}
	for _, p := range a.positions {
		if !p.saved {
			due = earliest(due, p.started.Add(timeout))
		}
	}
	return due
}

// fsyncDeadline is when the oldest unsynced commit reaches --sync-timeout.
func (a *Actor) fsyncDeadline() time.Time {
	due, _ := a.opt.Store.SyncDeadline()
	return due
}

// retentionDeadline is when retention runs next: every RetentionEvery while
// the log has a segment it could delete (all but the active one).
func (a *Actor) retentionDeadline() time.Time {
	p := a.opt.Retention
	if a.opt.Dir == "" || (p.MaxAge <= 0 && p.MaxBytes <= 0) || a.opt.Store.Log.Segments() < 2 {
		return time.Time{}
	}
	return a.retainedAt.Add(a.retentionEvery())
}

// timerFired does what has fallen due, unless the timer was replaced
// after it fired.
func (a *Actor) timerFired(ctx actor.Context, m *wakeDue) {
	if a.wakes.fired(m) {
		a.wake(ctx, a.opt.Now())
	}
}
