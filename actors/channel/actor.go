package channel

import (
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
	Logger       *slog.Logger
	Now          func() time.Time
}

// Actor is the channel actor: the thin shell around Core.
type Actor struct {
	opt       Options
	core      *Core
	consumers []*Consumer
	next      int // round-robin start

	buf []byte
	// timer fires at timerAt, the earliest of Core's and upkeep's
	// deadlines; nil when nothing is due. timerGen tells a timer replaced
	// after it fired.
	timer    *time.Timer
	timerAt  time.Time
	timerGen uint64
	upkeep   upkeep

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
		return &Actor{opt: opt, core: NewCore(opt.Core, st, end, endCount), buf: make([]byte, 256<<10),
			upkeep: newUpkeep(opt.PersistEvery, offsetEvery)}
	})
}

func (a *Actor) Receive(ctx actor.Context) {
	a.receive(ctx)
	switch ctx.Message().(type) {
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		a.stopTimer()
	default:
		if !a.deleted {
			a.rearm(ctx)
		}
	}
}

func (a *Actor) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if a.opt.Dir != "" {
			// A follower's copy may have started elsewhere (it opened the
			// channel at its own end) until the leader's first report.
			a.upkeep.Unreported(a.opt.Now())
		}
		a.deliver(ctx)
	case *Subscribed:
		a.consumers = append(a.consumers, m.Consumer)
		a.deliver(ctx)
	case *Unsubscribed:
		a.removeConsumer(m.ConsumerID)
	case *WindowOpened:
		a.deliverSoon(ctx)
	case *deliverDue:
		a.deliverQueued = false
		a.deliver(ctx)
	case *Committed:
		a.core.CommittedTo(m.End, m.Count)
		a.deliverSoon(ctx)
	case *Truncated:
		a.core.TruncatedTo(m.End, m.Count)
	case *Reset:
		a.core.ResetTo(m.Start, m.Count)
	case *Finished:
		if err := a.core.Fin(m.ConsumerID, m.ID); err != nil {
			a.refuse(m.ConsumerID, "FIN", m.ID, err)
			return
		}
		a.released(ctx, m.ConsumerID, 1)
		if a.core.Ordered() && a.opt.Dir != "" {
			a.upkeep.Confirmed(a.opt.Now())
			a.syncing = true
			st := a.core.State()
			ctx.Send(ctx.Parent(), &OrderedFinished{Channel: a.opt.Name, ConsumerID: m.ConsumerID, ID: m.ID,
				Update: OffsetUpdate{Offset: st.Confirmed, Count: st.ConfirmedCount}})
			return
		}
		a.moved()
		a.deliverSoon(ctx)
	case *OrderedSynced:
		a.syncing = false
		if m.Err != nil {
			a.refuse(m.ConsumerID, "FIN", m.ID, m.Err)
		} else {
			a.sentOffset = a.core.State().Confirmed
		}
		a.deliverSoon(ctx)
	case *OrderChanged:
		a.core.SetOrdered(m.Ordered)
		a.deliverSoon(ctx)
	case *Requeued:
		if a.core.MovesToLog(m.Delay) && ctx.Parent() != nil {
			a.reqToLog(ctx, m)
			return
		}
		if err := a.core.Req(m.ConsumerID, m.ID, m.Delay, a.opt.Now()); err != nil {
			a.refuse(m.ConsumerID, "REQ", m.ID, err)
			return
		}
		a.released(ctx, m.ConsumerID, 1)
		a.deliverSoon(ctx)
	case *DelayStored:
		if m.Err != nil {
			a.opt.Logger.Warn("delayed REQ kept in memory", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "err", m.Err)
			a.core.MoveFailed(m.ID)
			return
		}
		a.core.Moved(m.ID)
		a.moved()
		a.deliverSoon(ctx)
	case *Touched:
		c := a.consumer(m.ConsumerID)
		timeout := time.Duration(0)
		if c != nil {
			timeout = c.MsgTimeout
		}
		if err := a.core.Touch(m.ConsumerID, m.ID, a.opt.Now(), timeout); err != nil {
			a.refuse(m.ConsumerID, "TOUCH", m.ID, err)
		}
	case *tick:
		if m.gen == a.timerGen && a.timer != nil {
			a.timer, a.timerAt = nil, time.Time{}
			a.due(ctx, a.opt.Now())
		}
	case *FollowerConnected:
		// What was sent while the follower was away may be lost.
		a.reportOffset(ctx, true)
	case *PauseChanged:
		a.core.SetPaused(m.Paused)
		if a.opt.Dir != "" {
			a.upkeep.Unsaved(a.opt.Now())
		}
		a.deliver(ctx)
	case *Emptied:
		for id, n := range a.core.Empty() {
			a.released(ctx, id, n)
		}
		a.moved()
		a.persist()
	case *PositionSet:
		a.core.SetPosition(m.Offset, m.Count)
		a.persist()
		a.sentOffset = m.Offset
		ctx.Send(ctx.Parent(), &PositionApplied{Channel: a.opt.Name, Token: m.Token,
			Update: OffsetUpdate{Offset: m.Offset, Count: m.Count, Flush: true, AllowBackward: true, ReplaceIntervals: true}})
		a.deliverSoon(ctx)
	case *MessageStateRequested:
		st := a.core.StateOf(*m)
		ctx.Respond(&st)
	case *StatsRequested:
		ids := make([]int64, len(a.consumers))
		for i, c := range a.consumers {
			ids[i] = c.ID
		}
		st := a.core.Stats()
		ctx.Respond(&Snapshot{Name: a.opt.Name, Stats: st, Consumers: ids, Oldest: a.oldest(st)})
	case *OffsetSynced:
		if a.core.ApplyOffset(m.Update) {
			if a.opt.Dir != "" {
				a.upkeep.Unsaved(a.opt.Now())
			}
			a.sentOffset = m.Update.Offset
			if m.Update.Flush {
				a.persist()
			}
		}
		if m.Reply != nil {
			m.Reply()
		}
	case *Deleted:
		a.deleted = true
		for _, c := range a.consumers {
			c.Out.ChannelGone()
		}
		a.consumers = nil
		if a.opt.Dir != "" {
			if err := storage.RemoveChannelState(a.opt.Dir, a.opt.Name); err != nil {
				a.opt.Logger.Warn("removing channel state", "channel", a.opt.Name, "err", err)
			}
		}
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		if !a.deleted {
			a.persist()
		}
	}
}

// reqToLog hands a long-delayed REQ to the partition to be copied into the
// log; the consumer's window slot is free at once, as for any REQ.
func (a *Actor) reqToLog(ctx actor.Context, m *Requeued) {
	mv, err := a.core.ReqToLog(m.ConsumerID, m.ID, m.Delay, a.opt.Now())
	if err != nil {
		a.refuse(m.ConsumerID, "REQ", m.ID, err)
		return
	}
	a.released(ctx, m.ConsumerID, 1)
	ctx.Send(ctx.Parent(), &DelayRequested{Channel: a.opt.Name, Move: mv, Reply: ctx.Self()})
	a.deliverSoon(ctx)
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
		u.Flush, u.AllowBackward = true, true
		if len(st.Intervals) <= 100 {
			u.Intervals, u.ReplaceIntervals = st.Intervals, true
		}
	}
	ctx.Send(ctx.Parent(), &ConfirmedMoved{Channel: a.opt.Name, Update: u})
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

func (a *Actor) stopTimer() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer, a.timerAt = nil, time.Time{}
	}
}

func (a *Actor) persist() {
	a.upkeep.Saved()
	if a.opt.Dir == "" {
		return
	}
	if err := storage.SaveChannelState(a.opt.Dir, a.opt.Name, a.core.State()); err != nil {
		a.opt.Logger.Error("saving channel state", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name, "err", err)
	}
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
