package topic

import (
	"context"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
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
	a.syncJoiner(ctx, node)
}

// joinSync is a join waiting for the replica to hold every ordered
// channel's confirmed position. An ordered FIN is confirmed on every ISR
// member, so that a leader elected from any of them resumes after it; a
// replica that caught up was sent positions only fire-and-forget, and
// could be elected, once in the ISR, with a position from before a
// confirmed FIN, and deliver that message again.
type joinSync struct {
	node     string
	token    int64
	asked    map[string]bool // channels yet to report their position
	syncs    int             // positions sent to the replica, not yet acknowledged
	deadline time.Time
}

// syncJoiner asks the channels for their positions and sends the ordered
// ones' to the joining replica, which must acknowledge them all before the
// metadata is asked to add it. From now until the metadata answers, ordered
// FINs and setoffsets wait for the replica as for an ISR member
// (offsetMembers), so it misses none confirmed meanwhile.
func (a *Actor) syncJoiner(ctx actor.Context, node string) {
	asked := map[string]bool{}
	for name := range a.channels {
		if !IsEphemeral(name) {
			asked[name] = true
		}
	}
	if len(asked) == 0 {
		a.askJoin(ctx, node)
		return
	}
	a.syncSeq++
	a.joining = &joinSync{node: node, token: a.syncSeq, asked: asked, deadline: a.opt.Now().Add(joinSyncWait(a.opt.Writer.ShrinkAfter))}
	for name := range asked {
		ctx.Send(a.channels[name], &channel.PositionAsked{Token: a.syncSeq})
	}
}

// joinSyncWait is how long the writes stay held for a joining replica to
// acknowledge the positions: --isr-shrink-after, a second by default.
func joinSyncWait(shrinkAfter time.Duration) time.Duration {
	if shrinkAfter > 0 {
		return shrinkAfter
	}
	return time.Second
}

// positionReported sends an ordered channel's position to the joining
// replica.
func (a *Actor) positionReported(ctx actor.Context, m *channel.PositionReported) {
	j := a.joining
	if j == nil || m.Token != j.token || !j.asked[m.Channel] {
		return
	}
	delete(j.asked, m.Channel)
	if pid, ok := a.replicas[j.node]; ok && m.Ordered {
		a.syncSeq++
		u := a.offsetUpdate(m.Channel, m.Update)
		u.SyncId = a.syncSeq
		a.syncs[a.syncSeq] = &offsetSync{pending: map[string]bool{j.node: true}, started: a.opt.Now(), join: true}
		j.syncs++
		ctx.Send(pid, &replica.ReplicateOffset{Update: u})
	}
	a.joinerSynced(ctx, nil)
}

// joinerSynced counts one of the joining replica's answers (err nil: it
// holds the position; also called with none when a channel's report needed
// no sync) and asks the metadata once every position is held. A refusal, a
// replica gone down, or the deadline ends the join as a refused one does:
// the writes go on and the replica tries again when it next acknowledges.
func (a *Actor) joinerSynced(ctx actor.Context, err error) {
	j := a.joining
	if j == nil {
		return
	}
	if err != nil {
		a.endJoinSync(ctx, err)
		return
	}
	if len(j.asked) > 0 || j.syncs > 0 {
		return
	}
	a.joining = nil
	a.askJoin(ctx, j.node)
}

// expireJoinSync ends a join whose positions were not all held in time.
func (a *Actor) expireJoinSync(ctx actor.Context) {
	if j := a.joining; j != nil && !a.opt.Now().Before(j.deadline) {
		a.endJoinSync(ctx, ErrOffsetNotReplicated)
	}
}

func (a *Actor) joinSyncDeadline() time.Time {
	if a.joining == nil {
		return time.Time{}
	}
	return a.joining.deadline
}

// endJoinSync gives the join up, with its syncs still waiting.
func (a *Actor) endJoinSync(ctx actor.Context, err error) {
	node := a.joining.node
	a.dropJoinSync()
	a.joined(ctx, &isrJoined{node: node, err: err})
}

// dropJoinSync forgets the join's positions and syncs: answers still on
// their way find nothing to count.
func (a *Actor) dropJoinSync() {
	a.joining = nil
	for id, s := range a.syncs {
		if s.join {
			delete(a.syncs, id)
		}
	}
}

// offsetMembers are the followers an ordered FIN or a setoffset waits for:
// the ISR's, and a replica whose join is under way.
func (a *Actor) offsetMembers() []string {
	members := a.writer.Followers()
	if j := a.joiningNode(); j != "" && !slices.Contains(members, j) {
		members = append(slices.Clone(members), j)
	}
	return members
}

// joiningNode is the replica syncing its positions or being added by the
// metadata, "" when none.
func (a *Actor) joiningNode() string {
	if a.joining != nil {
		return a.joining.node
	}
	for _, n := range a.role.Catchup {
		if a.progress.Joining(n) {
			return n
		}
	}
	return ""
}

// askJoin has the metadata add the replica to the ISR.
func (a *Actor) askJoin(ctx actor.Context, node string) {
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
	} else if a.leads() {
		a.syncsOnly(ctx, a.offsetMembers()) // FINs stop waiting for a replica no longer joining
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
