package topic

import (
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/storage"
)

// A partition's channels are its child actors. Each reads the committed log
// on its own; the partition starts them, tells them how far the log is
// committed, and stops them when they are deleted.

// announce tells every channel where the committed log ends, unless the
// topic is paused.
func (a *Actor) announce(ctx actor.Context) {
	if a.paused {
		return
	}
	end, count := a.opt.Store.Committed()
	for _, pid := range a.channels {
		ctx.Send(pid, &channel.Committed{End: end, Count: count})
	}
}

// channel returns a channel's actor, starting it if needed. A channel with no
// saved state starts where nsqd would: the first channel of a topic gets what
// was published before it, later ones start at the end. On a follower every
// such channel starts where the first would: the leader's channel may have
// started before records this replica already holds, and until its first
// report (within --channel-persist-interval) arrives, a failover must
// redeliver them rather than skip them.
//
// A channel of the same name deleted and not yet stopped has none: its
// actor still holds the name, and may still be removing its saved state,
// which a new one must not start from.
func (a *Actor) channel(ctx actor.Context, name string) *actor.PID {
	if pid, ok := a.channels[name]; ok {
		return pid
	}
	if a.leaving[name] != nil || a.ending {
		return nil
	}
	dir := a.opt.Dir
	if IsEphemeral(name) {
		dir = ""
	}
	var st storage.ChannelState
	found := false
	if dir != "" {
		var err error
		st, found, err = storage.LoadChannelState(dir, name)
		if err != nil {
			// Redelivering is better than losing: a damaged state restarts
			// the channel at the start of the retained log.
			a.opt.Logger.Warn("channel state unreadable, delivering the channel from the log's start", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", name, "err", err)
			st, found = storage.ChannelState{Confirmed: a.opt.Store.Log.Start()}, true
		}
	}
	end, count := a.opt.Store.Committed()
	if !found {
		st = storage.ChannelState{Confirmed: end, ConfirmedCount: count}
		if len(a.channels) == 0 || !a.leads() {
			st = storage.ChannelState{Confirmed: a.firstStart, ConfirmedCount: a.firstStartCount}
		}
	}
	props := channel.Props(channel.Options{
		Topic:        a.opt.Topic,
		Partition:    a.opt.Partition,
		Name:         name,
		Dir:          dir,
		Log:          a.opt.Store.Log,
		Core:         a.opt.Channel,
		PersistEvery: a.opt.PersistEvery,
		Logger:       a.opt.Logger,
		Now:          a.opt.Now,
	}, st, end, count)
	pid, err := ctx.SpawnNamed(a.instrument("channel", props), name)
	if err != nil {
		a.opt.Logger.Error("starting channel actor", "channel", name, "err", err)
		return nil
	}
	a.channels[name] = pid
	delete(a.stray, name)
	if a.paused {
		// A paused topic shows a new channel nothing until it is unpaused.
		ctx.Send(pid, &channel.Committed{End: st.Confirmed, Count: st.ConfirmedCount})
	}
	return pid
}

// leavingChannel is a deleted channel's actor on its way out, and the
// askers of ChannelWanted for its name, answered with a new channel once it
// has stopped (a consumer subscribing again at once to an ephemeral
// channel its last consumer just left, a channel deleted and created
// again).
type leavingChannel struct {
	pid     *actor.PID
	waiting []*actor.PID
}

// answer tells those waiting which channel they got (nil: none), once.
func (l *leavingChannel) answer(ctx actor.Context, pid *actor.PID) {
	for _, w := range l.waiting {
		ctx.Send(w, &ChannelReady{PID: pid})
	}
	l.waiting = nil
}

func (a *Actor) channelWanted(ctx actor.Context, m *ChannelWanted) {
	if l := a.leaving[m.Name]; l != nil && ctx.Sender() != nil && !a.ending {
		l.waiting = append(l.waiting, ctx.Sender())
		return
	}
	ctx.Respond(&ChannelReady{PID: a.channel(ctx, m.Name)})
}

func (a *Actor) channelDeleted(ctx actor.Context, m *ChannelDeleted) {
	pid, ok := a.channels[m.Name]
	if !ok {
		// Asked for again while a deleted one stops, and deleted again:
		// those asking get none, as they would have had it deleted.
		if l := a.leaving[m.Name]; l != nil {
			l.answer(ctx, nil)
		}
		if a.stray[m.Name] {
			a.strayDeleted(m.Name)
		}
		return
	}
	ctx.Send(pid, &channel.Deleted{})
	delete(a.channels, m.Name)
	if a.leaving == nil {
		a.leaving = make(map[string]*leavingChannel)
	}
	a.leaving[m.Name] = &leavingChannel{pid: pid}
	a.startFirstChannelAtEnd()
}

// childStopped: a child actor is gone. A deleted channel's name is free
// again, and those who asked for it meanwhile get a new channel. A channel
// that stopped without being deleted is forgotten (stray), so the next one
// asked for is made anew rather than a dead actor handed out: its
// Terminated, a system message, is taken before user messages already
// queued, such as the deletion that would have moved it to leaving.
func (a *Actor) childStopped(ctx actor.Context, m *actor.Terminated) {
	for name, l := range a.leaving {
		if !l.pid.Equal(m.Who) {
			continue
		}
		delete(a.leaving, name)
		if len(l.waiting) == 0 {
			return
		}
		l.answer(ctx, a.channel(ctx, name)) // nil while the partition stops
		return
	}
	for name, pid := range a.channels {
		if pid.Equal(m.Who) {
			delete(a.channels, name)
			if a.stray == nil {
				a.stray = make(map[string]bool)
			}
			a.stray[name] = true
			return
		}
	}
}

// strayDeleted is the deletion of a channel whose actor had already
// stopped: what its actor would have done, removing its saved state, is
// done here, so a channel made again is new.
func (a *Actor) strayDeleted(name string) {
	delete(a.stray, name)
	if a.opt.Dir != "" && !IsEphemeral(name) {
		if err := storage.RemoveChannelState(a.opt.Dir, name); err != nil {
			a.opt.Logger.Warn("removing channel state", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", name, "err", err)
		}
	}
	a.startFirstChannelAtEnd()
}

// refuseChannelWaiters answers those waiting for a channel of a leaving
// one's name with none: the partition is stopping and starts no channel.
func (a *Actor) refuseChannelWaiters(ctx actor.Context) {
	for _, l := range a.leaving {
		l.answer(ctx, nil)
	}
}

// startFirstChannelAtEnd: a topic with no channel keeps what is published
// for its first one; emptied, or left with no channel, it keeps only what
// is committed from now on.
func (a *Actor) startFirstChannelAtEnd() {
	if len(a.channels) == 0 {
		a.firstStart, a.firstStartCount = a.opt.Store.Committed()
	}
}

// pauseChanged: a paused topic commits writes but its channels see nothing
// new; unpaused, they hear the committed end at once.
func (a *Actor) pauseChanged(ctx actor.Context, m *PauseChanged) {
	a.paused = m.Paused
	if !a.paused {
		a.announce(ctx)
	}
}

// IsEphemeral reports whether a topic or channel name is ephemeral: kept in
// memory only by nsqd, here never replicated and never kept across restarts.
func IsEphemeral(name string) bool {
	return strings.HasSuffix(name, "#ephemeral") && len(name) > len("#ephemeral")
}
