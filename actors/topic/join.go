package topic

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
)

// A replica that caught up joins the ISR this way: the leader stops
// starting writes (publishes queue), lets the writes in flight commit, and
// only then has the metadata add the replica with EpochForWrite
// incremented. No record of the old epoch is in flight once the ISR has
// changed, and every member applies the next write in the new epoch. The
// tracker (progress.go) decides when a replica caught up and when its join
// goes on; this file performs its decisions.

// joinWait is how long writes stay held for a joining replica to
// acknowledge the last record once nothing else is in flight; a replica
// slower than that goes back to catching up and tries again, so a busy
// partition's writes are never held for long.
func joinWait(shrinkAfter time.Duration) time.Duration {
	if shrinkAfter > 0 && shrinkAfter < 200*time.Millisecond {
		return shrinkAfter
	}
	return 200 * time.Millisecond
}

// continueJoin asks the metadata to add the waiting replica once nothing is
// in flight and the replica has acknowledged the last record.
func (a *Actor) continueJoin(ctx actor.Context) {
	if a.progress.JoinNext() == "" || a.writer.InFlight() > 0 {
		return
	}
	node, step := a.progress.ContinueJoin(JoinView{
		Now: a.opt.Now(), InFlight: a.writer.InFlight(), Writable: a.leads() && a.writer.Writable(), Last: a.lastLogID(),
	})
	switch step {
	case JoinRelease:
		a.writer.Release()
		return
	case JoinMissed:
		a.writer.Release()
		if rec, _, ok := a.recordByLogID(a.progress.Progress(node).Match); ok {
			a.catchUp(ctx, node, []*messages.RecordRef{{LogId: rec.LogID, Epoch: rec.Epoch}})
		}
		a.flush(ctx)
		return
	case JoinAsk:
	default:
		return // its acks of the last writes are on their way; the partition wakes at the tracker's deadline to look again
	}
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
	a.progress.Joined(m.node)
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
		if n != after && !a.progress.Joining(n) {
			a.probeCatchup(ctx, n)
		}
	}
}

// probeCatchup sends a replica catching up the last committed record: it
// acknowledges it if it has everything (and may join), or refuses it for
// the record it lacks, which starts the catch-up. A leader whose log is
// still empty asks instead whether the replica holds nothing either
// (Follower.CheckEmpty). Without the probe a replica that restarted on an
// idle partition, or was placed on a never-written one, would wait for the
// next publish; while the partition stays idle and the replica catching
// up, the timer sends it again every --isr-shrink-after. A replica being
// pushed what it lacks is not probed: the push's acks tell.
func (a *Actor) probeCatchup(ctx actor.Context, node string) {
	if a.progress.Push(node) != nil {
		return
	}
	pid, ok := a.replicas[node]
	if !ok {
		return
	}
	log := storeLog{a.opt.Store}
	if end, _ := a.opt.Store.Committed(); log.Count() == 0 && end == 0 {
		if a.writer.InFlight() > 0 {
			return // the first write's answer tells
		}
		ctx.Send(pid, &replica.Replicate{Write: a.emptyProbe(a.writer.Epoch())})
		a.progress.Probed(node, a.opt.Now())
		return
	}
	if w, ok := probeWrite(log); ok {
		ctx.Send(pid, &replica.Replicate{Write: a.replicaWrite(a.writer.Epoch(), w.Record, w.Prev, w.Data)})
		a.progress.Probed(node, a.opt.Now())
	}
}

// resendAfter is how long a leader waits before sending writes again to a
// follower that refused them for not knowing the leader's epoch yet: the
// metadata watch brings it within milliseconds.
const resendAfter = 20 * time.Millisecond

// resend sends a follower every write in flight again, in order; what it
// applied already it acknowledges without writing. A replica catching up
// is probed first: what it refused may have been its probe, and a leader
// without a majority has no new write to send it instead.
func (a *Actor) resend(ctx actor.Context, node string) {
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
