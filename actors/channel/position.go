package channel

import "github.com/asynkron/protoactor-go/actor"

// History replay (docs/replication.md#setoffset): an operator moves a
// channel to a message boundary, backwards to replay or forwards to skip.
// The partition resolves the position and tells the channel; the channel
// answers PositionApplied so the partition replicates the new position to
// every ISR member after any offset the channel reported before.

// PositionSet moves the channel to Offset (Count messages before it).
type PositionSet struct {
	Offset, Count int64
	Token         int64 // handed back in PositionApplied
}

// PositionApplied: the channel is at its new position.
type PositionApplied struct {
	Channel string
	Update  OffsetUpdate
	Token   int64
}

// PositionSaved: the channel's new position is on this node's disk, after
// PositionApplied; Err when the save failed (the position holds in memory).
type PositionSaved struct {
	Token int64
	Err   error
}

// SetPosition moves the channel to a message boundary: everything before
// it counts as confirmed and everything after as not yet delivered. What is
// in flight stays in flight; a FIN of it is harmless either way.
func (c *Core) SetPosition(offset, count int64) {
	c.confirmed, c.confirmedCount = offset, count
	c.fins = intervals{}
	c.ready, c.requeued, c.deferred = nil, nil, nil
	c.dropParked()
	c.cursor, c.cursorCount = offset, count
	c.cached = nil
	if offset > c.end {
		c.end, c.endCount = offset, count
	}
}

// positionSet moves the channel and tells the partition, which replicates
// the new position.
func (a *Actor) positionSet(ctx actor.Context, m *PositionSet) {
	a.core.SetPosition(m.Offset, m.Count)
	a.sentOffset = m.Offset
	parent, root, token := ctx.Parent(), ctx.ActorSystem().Root, m.Token
	ctx.Send(parent, &PositionApplied{Channel: a.opt.Name, Token: token,
		Update: OffsetUpdate{Offset: m.Offset, Count: m.Count, Flush: true, AllowBackward: true, ReplaceIntervals: true}})
	// The followers save the position while this node does: the
	// setoffset is answered once every ISR member has it on disk, this one
	// too. Sent after PositionApplied, so it arrives after it.
	a.persistThen(func(err error) { root.Send(parent, &PositionSaved{Token: token, Err: err}) })
	a.deliverSoon(ctx)
}
