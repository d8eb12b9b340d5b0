package topic

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
)

// The leader's side of replication: its writes and channel offsets go to
// the replica actors, and what the followers answer drives the write flow,
// catch-up and joins. The follower's side is apply.go.

// sendToReplicas hands a locally written record to every follower's replica
// actor at once, and to replicas catching up; the partition actor goes on
// with the next publish.
func (a *Actor) sendToReplicas(ctx actor.Context, sends []ReplicaSend) {
	var pb *messages.ReplicaWrite
	var last *Write
	for _, s := range sends {
		if s.Write != last {
			last = s.Write
			pb = a.replicaWrite(s.Write.Record.Epoch, s.Write.Record, s.Write.Prev, s.Write.Data)
			a.sendToCatchup(ctx, pb)
		}
		pid, ok := a.replicas[s.Node]
		if !ok {
			a.perform(ctx, a.writer.FollowerDown(s.Node))
			continue
		}
		ctx.Send(pid, &replica.Replicate{Write: pb, Here: a.here})
	}
}

// sendToCatchup gives replicas that are catching up every new write too,
// so they can join the ISR once they have acknowledged one. A replica that
// is being pushed the log gets the new writes from the push instead: sent
// now, they would land behind records it does not have yet and each be
// refused.
func (a *Actor) sendToCatchup(ctx actor.Context, pb *messages.ReplicaWrite) {
	for _, n := range a.role.Catchup {
		if a.progress.Push(n) != nil {
			continue
		}
		if pid, ok := a.replicas[n]; ok && !slices.Contains(a.writer.Followers(), n) {
			ctx.Send(pid, &replica.Replicate{Write: pb})
		}
	}
}

func (a *Actor) replicaAcked(ctx actor.Context, m *replica.Acked) {
	if m.Here != nil {
		a.here = m.Here
	}
	a.observeAck(m)
	if m.Ack.GetOffsetSyncId() != 0 {
		a.offsetAcked(ctx, m.Node, m.Ack)
		return
	}
	kind := m.Ack.GetKind()
	if kind == messages.ErrorKind_ERROR_KIND_NONE && m.Ack.GetEpochForWrite() < a.writer.LeadEpoch() {
		// A write of an earlier leadership of this node, acknowledged on a
		// stream of that leadership: its LogID may since have been handed
		// to a write of this one, which the follower does not have.
		return
	}
	in := AckIn{
		Node:     m.Node,
		LogID:    m.LogID,
		Behind:   m.Ack.GetBehind(),
		Refused:  kind != messages.ErrorKind_ERROR_KIND_NONE,
		OldEpoch: kind == messages.ErrorKind_ERROR_KIND_TEMPORARY && m.Ack.GetEpochForWrite() < a.writer.Epoch(),
		InSync:   slices.Contains(a.writer.Followers(), m.Node),
	}
	if !in.InSync && !in.Refused && !in.Behind {
		in.Current = a.current(m.LogID) || a.liveAlone(m.Node)
	}
	s := a.progress.Acked(in, a.opt.Now())
	if s.CatchUp {
		a.catchUp(ctx, m.Node, m.Ack.GetFollowerRecords())
	}
	if s.PushMore {
		a.pushChunk(ctx, m.Node)
	}
	if s.Writer {
		var err error
		if in.Refused {
			err = &Error{Code: m.Ack.GetCode(), Text: m.Ack.GetText()}
		}
		a.perform(ctx, a.writer.Acked(m.Node, m.LogID, err))
	}
	if s.Hold {
		a.writer.Hold()
	}
	if s.Join {
		a.continueJoin(ctx)
	}
}

// current reports whether logID is the last committed record or a write in
// flight: a replica that applied it has all this leader has.
func (a *Actor) current(logID int64) bool {
	if logID == a.lastLogID() {
		return true
	}
	for _, w := range a.writer.InFlightWrites() {
		if w.Record.LogID == logID {
			return true
		}
	}
	return false
}

// liveAlone: this leader has no follower in sync, so each write commits as
// soon as it is on disk here and a replica catching up acknowledges it
// only after later ones committed; under steady writes its acks would
// never be current. One that is no longer pushed the log and acknowledged
// a write is close enough to begin its join, which holds the writes and
// waits for its ack of the last one anyway (docs/replication.md#isr-join).
func (a *Actor) liveAlone(node string) bool {
	return len(a.writer.Followers()) == 0 && a.progress.Push(node) == nil
}

// followerDown: the stream to a follower broke or went silent; the writes
// and ordered FINs waiting on it count it as failed.
func (a *Actor) followerDown(ctx actor.Context, m *replica.FollowerDown) {
	if !a.fromReplica(m.Node, m.From) {
		return
	}
	a.progress.Down(m.Node, a.opt.Now())
	a.perform(ctx, a.writer.FollowerDown(m.Node))
	a.syncsWithout(ctx, m.Node)
}

// followerUp: a stream to a follower opened. A replica catching up is
// probed for what it lacks; one in sync is sent again the writes it missed
// while its stream was down; and the channels report their offsets again.
func (a *Actor) followerUp(ctx actor.Context, m *replica.FollowerUp) {
	if !a.fromReplica(m.Node, m.From) {
		return
	}
	probe := a.progress.Up(m.Node)
	if a.leads() {
		if probe {
			a.probeCatchup(ctx, m.Node)
		}
		if a.writer.FollowerBack(m.Node) {
			a.resend(ctx, m.Node)
		}
	}
	a.resendOffsets(ctx)
}

// fromReplica reports whether from is the replica actor this partition
// uses for node now: one stopped with an earlier leadership, or when the
// node left the ISR, may still report on its stream, which is not this
// leadership's (a leadership lost and regained at once starts new ones).
func (a *Actor) fromReplica(node string, from *actor.PID) bool {
	pid, ok := a.replicas[node]
	return ok && pid.Equal(from)
}

// replicateOffset sends a leader channel's confirmed offset to every
// follower, fire-and-forget.
func (a *Actor) replicateOffset(ctx actor.Context, m *channel.ConfirmedMoved) {
	if !a.leads() || len(a.replicas) == 0 {
		return
	}
	u := a.offsetUpdate(m.Channel, m.Update)
	for _, pid := range a.replicas {
		ctx.Send(pid, &replica.ReplicateOffset{Update: u})
	}
}

// resendOffsets has every channel report its whole confirmed state again:
// offsets are sent fire-and-forget and only when they change, so a follower
// that was unreachable, or had not opened the partition yet, gets them here.
func (a *Actor) resendOffsets(ctx actor.Context) {
	if !a.leads() {
		return
	}
	for _, pid := range a.channels {
		ctx.Send(pid, &channel.FollowerConnected{})
	}
}
