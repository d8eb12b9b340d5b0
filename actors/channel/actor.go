package channel

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/storage"
)

// LogReader reads committed messages of the partition's log. Committed bytes
// never change, so channel actors read them without asking the partition.
type LogReader interface {
	ReadMessages(off, end int64, buf []byte) ([]storage.StoredMessage, int64, error)
}

// Options configure a channel actor.
type Options struct {
	Topic        string
	Partition    int32
	Name         string
	Dir          string // partition directory holding channel state; "" for ephemeral channels
	Log          LogReader
	Core         Config
	PersistEvery time.Duration
	// States saves the channel's state off the actor's turn, batched with
	// the node's other channels'; nil saves it at once.
	States *storage.ChannelStates
	Logger *slog.Logger
	Now    func() time.Time
	// DeadLetters publishes the channel's dead letters; without it the
	// channel takes no max_attempts.
	DeadLetters DeadLetterPublisher
}

// Actor is the channel actor: the thin shell around Core.
type Actor struct {
	opt  Options
	core *Core
	// saved is the state last written to disk, nil before the first write.
	saved     *storage.ChannelState
	consumers []*Consumer
	next      int // round-robin start

	// timer fires at timerAt, the earliest of Core's and upkeep's
	// deadlines; nil when nothing is due. timerGen tells a timer replaced
	// after it fired.
	timer    *time.Timer
	timerAt  time.Time
	timerGen uint64
	upkeep   upkeep

	e2e *E2E // nil unless Core.E2EQuantiles are set

	deliverQueued bool
	syncing       bool  // an ordered FIN waits for every ISR member
	sentOffset    int64 // confirmed offset last reported to the partition
	deleted       bool
}

// Props makes a channel actor starting from state over a log committed to end.
func Props(opt Options, st storage.ChannelState, end, endCount int64) *actor.Props {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.PersistEvery <= 0 {
		opt.PersistEvery = 2 * time.Second
	}
	opt.Core.Name = opt.Name
	if opt.Dir == "" {
		opt.Core.ReqToEndThreshold = 0 // an ephemeral channel has no log copy
	}
	return actor.PropsFromProducer(func() actor.Actor {
		a := &Actor{opt: opt, core: NewCore(opt.Core, st, end, endCount),
			upkeep: newPhasedUpkeep(opt.PersistEvery, offsetEvery, phaseOf(opt))}
		if len(opt.Core.E2EQuantiles) > 0 {
			a.e2e = NewE2E(opt.Core.E2EQuantiles, opt.Core.E2EWindow, opt.Now())
		}
		return a
	})
}

func (a *Actor) Receive(ctx actor.Context) {
	a.receive(ctx)
	switch ctx.Message().(type) {
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		a.stopTimer()
	default:
		if !a.deleted {
			a.publishDead(ctx)
			a.rearm(ctx)
		}
	}
}

// receive hands each message to the method named for what happened: the
// channel's own life and timers here, the rest by who sends them.
func (a *Actor) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case *deliverDue:
		a.deliveryDue(ctx)
	case *tick:
		a.timerFired(ctx, m)
	case *actor.Stopping:
		a.stopping()
	default:
		if !a.receiveConsumer(ctx, m) && !a.receivePartition(ctx, m) {
			a.receiveAdmin(ctx, m)
		}
	}
}

// receiveConsumer takes what the consumers' sessions send; it reports
// whether m was one of them.
func (a *Actor) receiveConsumer(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *Subscribed:
		a.subscribed(ctx, m)
	case *Unsubscribed:
		a.removeConsumer(ctx, m.ConsumerID)
		// A tag nobody desires any more goes to the untagged consumers.
		a.deliverSoon(ctx)
	case *WindowOpened:
		a.deliverSoon(ctx)
	case *Finished:
		a.finished(ctx, m)
	case *Requeued:
		a.requeued(ctx, m)
	case *Touched:
		a.touched(m)
	default:
		return false
	}
	return true
}

// receivePartition takes what the partition tells its channel: how far
// the log goes, and the answers and offsets of replication. It reports
// whether m was one of them.
func (a *Actor) receivePartition(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *Committed:
		a.committed(ctx, m)
	case *Truncated:
		before := a.core.Confirmed()
		a.core.TruncatedTo(m.End, m.Count)
		a.movedBack("a cut of a diverged log", before, before)
	case *Reset:
		before := a.core.Confirmed()
		a.core.ResetTo(m.Start, m.Count)
		a.movedBack("a full sync", before, before)
	case *OrderedSynced:
		a.orderedSynced(ctx, m)
	case *DelayStored:
		a.delayStored(ctx, m)
	case *FollowerConnected:
		a.reportOffset(ctx, true) // what was sent while the follower was away may be lost
	case *PositionAsked:
		ctx.Send(ctx.Parent(), &PositionReported{Channel: a.opt.Name, Ordered: a.core.Ordered(), Update: a.fullUpdate(), Token: m.Token})
	case *OffsetSynced:
		a.offsetSynced(m)
	case *PositionSet:
		a.positionSet(ctx, m)
	default:
		return false
	}
	return true
}

// receiveAdmin takes the operator's changes and questions, through the
// broker.
func (a *Actor) receiveAdmin(ctx actor.Context, m any) {
	switch m := m.(type) {
	case *PauseChanged:
		a.pauseChanged(ctx, m)
	case *Emptied:
		a.emptied(ctx)
	case *SkipChanged:
		a.skipChanged(ctx, m)
	case *DeferredEmptyAsked:
		a.deferredEmptyAsked(m)
	case *DeferredDueAsked:
		m.Reply(a.core.DeferredDue(m.Until))
		a.deliverSoon(ctx)
	case *ClientLimitsChanged:
		a.clientLimitsChanged(ctx, m)
	case *RateLimitChanged:
		a.core.SetRateLimit(m.KB, a.opt.Now())
		a.deliverSoon(ctx)
	case *FinishAsked:
		a.finishAsked(ctx, m)
	case *MaxAttemptsChanged:
		a.maxAttemptsChanged(m)
	case *DeadLettered:
		a.deadLettered(ctx, m)
	case *DeadLetterFailed:
		a.deadLetterFailed(m)
	case *OrderChanged:
		a.orderChanged(ctx, m)
	case *MessageStateRequested:
		a.messageStateRequested(ctx, m)
	case *StatsRequested:
		a.stats(ctx)
	case *Deleted:
		a.channelDeleted(ctx)
	}
}

func (a *Actor) started(ctx actor.Context) {
	if a.opt.Dir != "" {
		// A follower's copy may have started elsewhere (it opened the
		// channel at its own end) until the leader's first report.
		a.upkeep.Unreported(a.opt.Now())
	}
	a.deliver(ctx)
}

func (a *Actor) stopping() {
	if !a.deleted {
		a.persist()
	}
}

// timerFired does what has fallen due, unless the timer was replaced
// after it fired.
func (a *Actor) timerFired(ctx actor.Context, m *tick) {
	if m.gen == a.timerGen && a.timer != nil {
		a.timer, a.timerAt = nil, time.Time{}
		a.due(ctx, a.opt.Now())
	}
}

// offsetSynced applies the leader's confirmed offset on this follower.
func (a *Actor) offsetSynced(m *OffsetSynced) {
	before := a.core.Confirmed()
	moved := a.core.ApplyOffset(m.Update)
	asked := before
	if m.Update.Flush {
		asked = m.Update.Offset // clamped to this replica's end when beyond it
	}
	a.movedBack("the leader's report", before, asked)
	if moved {
		if a.opt.Dir != "" {
			a.upkeep.Unsaved(a.opt.Now())
		}
		a.sentOffset = m.Update.Offset
		if m.Update.Flush {
			// A leader asking for an answer counts this replica as holding
			// the position once it has it: the answer waits for the save.
			var then func(error)
			if m.Reply != nil {
				then = func(error) { m.Reply() }
			}
			a.persistThen(then)
			return
		}
	}
	if m.Reply != nil {
		m.Reply()
	}
}

// movedBack logs, at debug, a follower channel's confirmed position going
// back or stopping short of the leader's: what a redelivery after a
// failover is read against. Every failover moves many, so not at info.
func (a *Actor) movedBack(why string, before, asked int64) {
	after := a.core.Confirmed()
	if after >= before && after >= asked {
		return
	}
	a.opt.Logger.Debug("channel position moved back or held short", "topic", a.opt.Topic, "partition", a.opt.Partition,
		"channel", a.opt.Name, "by", why, "from", before, "to", after, "asked", asked, "end", a.core.Stats().End)
}

func (a *Actor) pauseChanged(ctx actor.Context, m *PauseChanged) {
	a.core.SetPaused(m.Paused)
	if a.opt.Dir != "" {
		a.upkeep.Unsaved(a.opt.Now())
	}
	a.deliver(ctx)
}

func (a *Actor) emptied(ctx actor.Context) { a.dropped(ctx, a.core.Empty()) }

func (a *Actor) skipChanged(ctx actor.Context, m *SkipChanged) {
	if m.Skipped == a.core.Skipped() {
		return
	}
	a.dropped(ctx, a.core.SetSkipped(m.Skipped))
}

// deferredEmptyAsked confirms the deferred messages it drops; the moved
// confirmed state reaches the followers as a FIN's does.
func (a *Actor) deferredEmptyAsked(m *DeferredEmptyAsked) {
	n := a.core.EmptyDeferred()
	if n > 0 {
		a.moved()
	}
	m.Reply(n)
}

// dropped gives the consumers back the window of what was dropped in
// flight and saves the position past it.
func (a *Actor) dropped(ctx actor.Context, released map[int64]int) {
	for id, n := range released {
		a.released(ctx, id, n)
	}
	a.moved()
	a.persist()
}

func (a *Actor) orderChanged(ctx actor.Context, m *OrderChanged) {
	a.core.SetOrdered(m.Ordered)
	a.deliverSoon(ctx)
}

func (a *Actor) stats(ctx actor.Context) {
	ids := make([]int64, len(a.consumers))
	limited := 0
	for i, c := range a.consumers {
		ids[i] = c.ID
		if _, ok := c.Limit(); ok {
			limited++
		}
	}
	st := a.core.Stats()
	snap := &Snapshot{Name: a.opt.Name, Stats: st, Consumers: ids, Limited: limited, Oldest: a.oldest(st)}
	if a.e2e != nil {
		snap.E2E = a.e2e.Summary(a.opt.Now())
	}
	ctx.Respond(snap)
}

// channelDeleted tells the consumers the channel is gone, removes its
// saved state and stops the actor.
func (a *Actor) channelDeleted(ctx actor.Context) {
	a.deleted = true
	for _, c := range a.consumers {
		c.Out.ChannelGone()
	}
	a.consumers = nil
	if a.opt.Dir != "" {
		if err := a.opt.States.Remove(a.opt.Dir, a.opt.Name); err != nil {
			a.opt.Logger.Warn("removing channel state", "channel", a.opt.Name, "err", err)
		}
	}
	ctx.Stop(ctx.Self())
}

// offsetEvery bounds how often a busy channel reports its confirmed offset
// for replication: the followers' copy is allowed to lag (at-least-once).
const offsetEvery = 50 * time.Millisecond

// moved: the confirmed state changed; an ephemeral channel neither saves
// nor replicates it.
func (a *Actor) moved() {
	if a.opt.Dir != "" {
		a.upkeep.Moved(a.opt.Now())
	}
}

// due does what has fallen due: timeouts, deferred messages coming due,
// saving the state and reporting the confirmed offset.
func (a *Actor) due(ctx actor.Context, now time.Time) {
	for id, n := range a.core.Tick(now) {
		a.released(ctx, id, n)
	}
	save, full, offset := a.upkeep.Due(now)
	if save {
		a.persist()
	}
	if full || offset {
		a.reportOffset(ctx, full)
	}
	a.deliver(ctx)
}

// reportOffset tells the partition where the channel has confirmed to; the
// full report, sent after changes and when a follower connects, may move a
// follower back and carries the FINished ranges when there are few.
func (a *Actor) reportOffset(ctx actor.Context, full bool) {
	if a.opt.Dir == "" || ctx.Parent() == nil {
		return
	}
	st := a.core.State()
	if !full && st.Confirmed == a.sentOffset {
		return
	}
	a.sentOffset = st.Confirmed
	u := OffsetUpdate{Offset: st.Confirmed, Count: st.ConfirmedCount}
	if full {
		u = a.fullUpdate()
	}
	ctx.Send(ctx.Parent(), &ConfirmedMoved{Channel: a.opt.Name, Update: u})
}

// fullUpdate is the channel's confirmed state as a follower takes it whole:
// it may move the follower back, and replaces its FINished intervals when
// they are few enough to send.
func (a *Actor) fullUpdate() OffsetUpdate {
	st := a.core.State()
	u := OffsetUpdate{Offset: st.Confirmed, Count: st.ConfirmedCount, Flush: true, AllowBackward: true}
	if len(st.Intervals) <= 100 {
		u.Intervals, u.ReplaceIntervals = st.Intervals, true
	}
	return u
}

// rearm keeps one timer for the earliest of the timeouts, deferred
// deliveries, the save and the offset reports, and none when nothing is
// due. A timer set for earlier is kept: the tick arms again for the rest.
func (a *Actor) rearm(ctx actor.Context) {
	due := earliest(a.core.NextDue(), a.upkeep.NextDeadline())
	if due.IsZero() {
		a.stopTimer()
		return
	}
	if a.timer != nil && !due.Before(a.timerAt) {
		return
	}
	a.stopTimer()
	a.timerGen++
	a.timerAt = due
	self, root, m := ctx.Self(), ctx.ActorSystem().Root, &tick{gen: a.timerGen}
	a.timer = time.AfterFunc(max(due.Sub(a.opt.Now()), time.Millisecond), func() { root.Send(self, m) })
}

// phaseOf spreads the channels' upkeep deadlines (upkeep.phase): a hash
// of the channel's name and partition, as a fraction.
func phaseOf(opt Options) float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s\x00%d\x00%s", opt.Topic, opt.Partition, opt.Name)
	return float64(h.Sum64()>>11) / (1 << 53)
}

func (a *Actor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer, a.timerAt = nil, time.Time{}
	}
}

func (a *Actor) persist() { a.persistThen(nil) }

// persistThen saves the state unless it is on disk already, and calls
// then, if set, once it is, or with the error of a save that failed (the
// state is applied either way, and a failure is logged). The node's saver
// retries a failed write and calls then only once one worked.
func (a *Actor) persistThen(then func(error)) {
	a.upkeep.Saved()
	st := a.core.State()
	// A state already on disk is not written again: a leader re-sends every
	// channel's offset to a follower whose stream reconnects, and a sync
	// and a rename for each of thousands of channels, unchanged, would
	// hold the disk (and etcd behind it) while a failover needs both.
	if a.opt.Dir == "" || a.saved != nil && a.saved.Equal(st) {
		if then != nil {
			// Queued already, perhaps not yet written: the answer waits
			// for it as it would have for a save of its own.
			a.opt.States.AfterSaved(a.opt.Dir, a.opt.Name, then)
		}
		return
	}
	if err := a.opt.States.Save(a.opt.Dir, a.opt.Name, st, then); err != nil {
		a.saved = nil
		a.opt.Logger.Error("saving channel state", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "err", err)
		if then != nil && a.opt.States != nil {
			then(err) // Save took no waiter
		}
		return
	}
	a.saved = &st
}

// oldest reads the timestamp of the first message after the confirmed
// offset: how far behind the channel's consumers are, in time.
func (a *Actor) oldest(st Stats) int64 {
	if st.Confirmed >= st.End || a.opt.Log == nil {
		return 0
	}
	msgs, _, err := a.opt.Log.ReadMessages(st.Confirmed, st.End, make([]byte, 512))
	if err != nil || len(msgs) == 0 {
		return 0
	}
	return msgs[0].Timestamp
}
