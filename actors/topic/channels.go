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
		ctx.Send(pid, &channel.Committed{End: end, Count: count, Here: a.here})
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
	if a.ends[name].leaving() || a.ending {
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
		st, found, err = a.opt.States.Load(dir, name)
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
		States:       a.opt.States,
		Logger:       a.opt.Logger,
		Now:          a.opt.Now,
		DeadLetters:  a.opt.DeadLetters,
	}, st, end, count)
	pid, err := ctx.SpawnNamed(a.instrument("channel", props), name)
	if err != nil {
		a.opt.Logger.Error("starting channel actor", "channel", name, "err", err)
		return nil
	}
	a.channels[name] = pid
	delete(a.ends, name) // a deletion still to come for a stopped one now deletes this one
	if a.paused {
		// A paused topic shows a new channel nothing until it is unpaused.
		ctx.Send(pid, &channel.Committed{End: st.Confirmed, Count: st.ConfirmedCount})
	}
	return pid
}

// channelEnd is a channel's deletion and its actor's stop, which arrive in
// either order. Deleted first, the channel is leaving: its actor still
// holds the name, and those asking for a channel of that name meanwhile (a
// consumer subscribing again at once to an ephemeral channel its last
// consumer just left, a channel deleted and created again) get a new one
// once it has stopped. Stopped first (its Terminated, a system message,
// overtook the deletion queued behind it), the deletion still to come
// removes the saved state the actor would have removed.
type channelEnd struct {
	pid     *actor.PID // the leaving actor; nil when it stopped first
	waiting []*actor.PID
}

// leaving reports a deleted channel whose actor has not stopped yet.
func (e *channelEnd) leaving() bool { return e != nil && e.pid != nil }

// answer tells those waiting which channel they got (nil: none), once.
func (e *channelEnd) answer(ctx actor.Context, pid *actor.PID) {
	for _, w := range e.waiting {
		ctx.Send(w, &ChannelReady{PID: pid})
	}
	e.waiting = nil
}

func (a *Actor) channelWanted(ctx actor.Context, m *ChannelWanted) {
	if e := a.ends[m.Name]; e.leaving() && ctx.Sender() != nil && !a.ending {
		e.waiting = append(e.waiting, ctx.Sender())
		return
	}
	ctx.Respond(&ChannelReady{PID: a.channel(ctx, m.Name)})
}

func (a *Actor) channelDeleted(ctx actor.Context, m *ChannelDeleted) {
	pid, ok := a.channels[m.Name]
	if !ok {
		switch e := a.ends[m.Name]; {
		case e.leaving():
			// Asked for again while a deleted one stops, and deleted
			// again: those asking get none, as they would have had it
			// deleted.
			e.answer(ctx, nil)
		case e != nil:
			a.deletedAfterStop(m.Name)
		}
		return
	}
	ctx.Send(pid, &channel.Deleted{})
	delete(a.channels, m.Name)
	a.ends[m.Name] = &channelEnd{pid: pid}
	a.startFirstChannelAtEnd()
}

// childStopped: a child actor is gone. A deleted channel's name is free
// again, and those who asked for it meanwhile get a new channel. A channel
// that stopped before its deletion came is no longer handed out: the next
// one asked for is made anew, and a deletion arriving later still removes
// its saved state.
func (a *Actor) childStopped(ctx actor.Context, m *actor.Terminated) {
	for name, e := range a.ends {
		if !e.leaving() || !e.pid.Equal(m.Who) {
			continue
		}
		delete(a.ends, name)
		if len(e.waiting) == 0 {
			return
		}
		e.answer(ctx, a.channel(ctx, name)) // nil while the partition stops
		return
	}
	for name, pid := range a.channels {
		if pid.Equal(m.Who) {
			delete(a.channels, name)
			a.ends[name] = &channelEnd{}
			return
		}
	}
}

// deletedAfterStop is the deletion of a channel whose actor had already
// stopped: what its actor would have done, removing its saved state, is
// done here, so a channel made again is new.
func (a *Actor) deletedAfterStop(name string) {
	delete(a.ends, name)
	if a.opt.Dir != "" && !IsEphemeral(name) {
		if err := a.opt.States.Remove(a.opt.Dir, name); err != nil {
			a.opt.Logger.Warn("removing channel state", "topic", a.opt.Topic, "partition", a.opt.Partition, "channel", name, "err", err)
		}
	}
	a.startFirstChannelAtEnd()
}

// refuseChannelWaiters answers those waiting for a channel of a leaving
// one's name with none: the partition is stopping and starts no channel.
func (a *Actor) refuseChannelWaiters(ctx actor.Context) {
	for _, e := range a.ends {
		e.answer(ctx, nil)
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
