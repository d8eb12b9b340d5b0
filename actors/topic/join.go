package topic

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
)

// A replica that caught up joins the ISR the way the reference's
// handleRequestJoinISR does: the leader stops starting writes (publishes
// queue), lets the writes in flight commit, and only then has the metadata
// add the replica with EpochForWrite incremented. No record of the old epoch
// is in flight once the ISR has changed, and every member applies the next
// write in the new epoch.

// catchupAcked: a catching-up replica acknowledged a write. Having applied a
// write that is still in flight (or the last committed one), it has all the
// leader has: it may join the ISR.
func (a *Actor) catchupAcked(ctx actor.Context, m *replica.Acked) {
	if m.Ack.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		return
	}
	a.ackedBy[m.Node] = m.LogID // acks come in the order of the stream
	if a.joinNext == m.Node {
		a.continueJoin(ctx) // it may have just acknowledged the last record
		return
	}
	if a.opt.JoinISR == nil || a.joinNext != "" || len(a.joining) > 0 {
		return
	}
	current := m.LogID == a.lastLogID()
	for _, w := range a.writer.InFlightWrites() {
		current = current || w.Record.LogID == m.LogID
	}
	if !current {
		return
	}
	a.joinNext = m.Node
	a.joinHeld = a.opt.Now()
	a.writer.Hold()
	a.continueJoin(ctx)
}

// joinWait is how long writes stay held for a joining replica to
// acknowledge the last record once nothing else is in flight; a replica
// slower than that goes back to catching up and tries again, so a busy
// partition's writes are never held for long.
func (a *Actor) joinWait() time.Duration {
	if s := a.opt.Writer.ShrinkAfter; s > 0 && s < 200*time.Millisecond {
		return s
	}
	return 200 * time.Millisecond
}

// continueJoin asks the metadata to add the waiting replica once nothing is
// in flight and the replica has acknowledged the last record.
func (a *Actor) continueJoin(ctx actor.Context) {
	if a.joinNext == "" || a.writer.InFlight() > 0 {
		return
	}
	node := a.joinNext
	if !a.leads() || !a.writer.Writable() {
		a.joinNext = ""
		a.writer.Release()
		return
	}
	acked, last := a.ackedBy[node], a.lastLogID()
	if acked != last && a.opt.Now().Sub(a.joinHeld) < a.joinWait() {
		return // its acks of the last writes are on their way; the partition wakes at joinDeadline to look again
	}
	a.joinNext = ""
	if acked != last {
		// It missed a write made while it was joining: send it what
		// follows what it has, and try again once it is current.
		a.writer.Release()
		if rec, _, ok := a.recordByLogID(acked); ok {
			a.catchUp(ctx, node, []*messages.RecordRef{{LogId: rec.LogID, Epoch: rec.Epoch}})
		}
		a.flush(ctx)
		return
	}
	a.joining[node] = true
	self, root, join := ctx.Self(), ctx.ActorSystem().Root, a.opt.JoinISR
	go func() {
		c, cancel := context.WithTimeout(context.Background(), metadataTimeout)
		defer cancel()
		role, err := join(c, node)
		root.Send(self, &isrJoined{node: node, role: role, err: err})
	}()
}

type isrJoined struct {
	node string
	role Role
	err  error
}

func (a *Actor) joined(ctx actor.Context, m *isrJoined) {
	delete(a.joining, m.node)
	if m.err != nil {
		a.opt.Logger.Warn("joining the ISR", "topic", a.opt.Topic, "partition", a.opt.Partition, "node", m.node, "err", m.err)
	} else if m.role.EpochForWrite >= a.role.EpochForWrite {
		// The watch brings the same state; applying it here lets writes
		// start again without waiting for it.
		a.applyRole(ctx, m.role)
		a.opt.Logger.Info("replica joined the ISR", "topic", a.opt.Topic, "partition", a.opt.Partition, "node", m.node, "epoch_for_write", m.role.EpochForWrite)
	}
	if m.err == nil {
		a.opt.Observer.ISRExpanded(a.opt.Topic, a.opt.Partition, m.node)
		a.resendOffsets(ctx)
	}
	if a.writer != nil {
		a.writer.Release()
	}
	a.flush(ctx)
	a.probeWaitingJoins(ctx, m.node)
}

// probeWaitingJoins probes the replicas still catching up once a join is
// over: one that acknowledged everything while another joined was passed
// over, and on an idle partition no write would make it acknowledge again.
// The replica whose join failed waits for the next write, so a failing
// metadata store is not asked again in a loop.
func (a *Actor) probeWaitingJoins(ctx actor.Context, after string) {
	if !a.leads() {
		return
	}
	for _, n := range a.role.Catchup {
		if n != after && !a.joining[n] {
			a.probeCatchup(ctx, n)
		}
	}
}

// probeCatchup sends a replica catching up the last committed record: it
// acknowledges it if it has everything (and may join), or refuses it for
// the record it lacks, which starts the catch-up. Without it a replica that
// restarted on an idle partition would wait for the next publish. A
// replica being pushed what it lacks is not probed: the push's acks tell.
func (a *Actor) probeCatchup(ctx actor.Context, node string) {
	if _, pushed := a.pushing[node]; pushed {
		return
	}
	pid, ok := a.replicas[node]
	commits := a.opt.Store.Commits
	n := commits.Count()
	if !ok || n == 0 {
		return
	}
	last, err := commits.Record(n - 1)
	if err != nil {
		return
	}
	var prev RecordRef
	if n > 1 {
		if r, err := commits.Record(n - 2); err == nil {
			prev = Ref(r)
		}
	}
	data := make([]byte, last.MsgSize)
	if _, err := a.opt.Store.Log.ReadAt(data, last.MsgOffset); err != nil {
		return
	}
	ctx.Send(pid, &replica.Replicate{Write: a.replicaWrite(a.writer.Epoch(), last, prev, data)})
}

// resendAfter is how long a leader waits before sending writes again to a
// follower that refused them for not knowing the leader's epoch yet: the
// metadata watch brings it within milliseconds.
const resendAfter = 20 * time.Millisecond

type resendDue struct{ node string }

func (a *Actor) resendLater(ctx actor.Context, node string) {
	if a.resending[node] {
		return
	}
	a.resending[node] = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(resendAfter, func() { root.Send(self, &resendDue{node: node}) })
}

// resend sends a follower every write in flight again, in order; what it
// applied already it acknowledges without writing. A replica catching up
// is probed first: what it refused may have been its probe, and a leader
// without a majority has no new write to send it instead.
func (a *Actor) resend(ctx actor.Context, node string) {
	delete(a.resending, node)
	pid, ok := a.replicas[node]
	if !ok || !a.leads() {
		return
	}
	if a.role.catchingUp(node) {
		a.probeCatchup(ctx, node)
	}
	for _, w := range a.writer.InFlightWrites() {
		ctx.Send(pid, &replica.Replicate{Write: a.replicaWrite(w.Record.Epoch, w.Record, w.Prev, w.Data)})
	}
}
