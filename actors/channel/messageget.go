package channel

import "github.com/asynkron/protoactor-go/actor"

// States /message/get reports for one message in one channel.
const (
	StateConfirmed = "confirmed" // FINished, or never to be delivered here
	StateInFlight  = "in_flight" // delivered, waiting for FIN, REQ or timeout
	StateWaiting   = "waiting"   // not delivered yet, or requeued, or deferred
	// StateDeadLettering: its deliveries are used up and its publish to
	// the dead-letter topic is not acknowledged yet.
	StateDeadLettering = "dead_lettering"
)

// MessageStateRequested asks a channel where one log message stands; the
// answer is a *MessageState.
type MessageStateRequested struct {
	Offset         int64
	ID             uint64
	DelayedChannel string // the message's, if it is a delayed copy
}

// MessageState answers MessageStateRequested.
type MessageState struct {
	Channel  string `json:"channel"`
	State    string `json:"state"`
	Deferred bool   `json:"deferred,omitempty"` // waiting for its delivery time
	Attempts uint16 `json:"attempts,omitempty"` // deliveries so far, while held in memory
	// DeadLetter is where a confirmed message was dead-lettered, while
	// the channel's leader remembers (its last few, since it started).
	DeadLetter *DeadLetterPlace `json:"dead_letter,omitempty"`
}

// StateOf says where the message at offset with this ID stands.
func (c *Core) StateOf(q MessageStateRequested) MessageState {
	st := MessageState{Channel: c.cfg.Name}
	if e, ok := c.inflight[q.ID]; ok && e.offset == q.Offset {
		st.State, st.Attempts = StateInFlight, e.attempts
		return st
	}
	if d, ok := c.dead[q.ID]; ok && d.e.offset == q.Offset {
		st.State, st.Attempts = StateDeadLettering, d.e.attempts
		return st
	}
	if q.Offset < c.confirmed || c.fins.covers(q.Offset) ||
		(q.DelayedChannel != "" && q.DelayedChannel != c.cfg.Name) {
		st.State = StateConfirmed
		if to, ok := c.deadPlace(q.Offset, q.ID); ok {
			st.DeadLetter = &to
		}
		return st
	}
	st.State = StateWaiting
	if e, ok := c.moving[q.ID]; ok {
		st.Deferred, st.Attempts = true, e.attempts
		return st
	}
	for _, e := range append(append(append([]*entry(nil), c.deferred...), c.parked...), c.unparked...) {
		if e.offset == q.Offset {
			st.Deferred, st.Attempts = true, e.attempts
			return st
		}
	}
	for _, list := range [][]*entry{c.requeued, c.ready} {
		for _, e := range list {
			if e.offset == q.Offset {
				st.Attempts = e.attempts
				return st
			}
		}
	}
	return st
}

func (a *Actor) messageStateRequested(ctx actor.Context, m *MessageStateRequested) {
	st := a.core.StateOf(*m)
	ctx.Respond(&st)
}
