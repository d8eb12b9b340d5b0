package topic

import (
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
)

// The metadata decides who leads a partition. A role change sets up this
// node's side of the write flow: a leader gets a Writer and one replica
// actor per follower, a follower the Follower core (follow.go).

// Role is this node's part in a partition, from the cluster's metadata.
type Role struct {
	Leader        string
	ISR           []string
	Catchup       []string // replicas catching up: sent every write, not waited for
	EpochForWrite int64
	// LeaderSession names the leadership (cluster.Leadership); "" when
	// unknown. A leader that sees it change while it leads lost and
	// regained the leadership in states it never applied.
	LeaderSession string
	// LeaderSince is the EpochForWrite the present leadership began in
	// (0: unknown). Joins and re-enables raise EpochForWrite under the
	// same leader; only a new leadership raises this.
	LeaderSince int64
	Replicas    int
	// Revision is the metadata's revision of this state (0: unknown). The
	// actor applies the states its own changes returned at once, so an
	// older one the watch delivers later must not undo them.
	Revision int64
}

func (r Role) catchingUp(node string) bool { return slices.Contains(r.Catchup, node) }

func (r Role) followersOf(self string) []string {
	var out []string
	for _, n := range r.ISR {
		if n != self {
			out = append(out, n)
		}
	}
	return out
}

func (r Role) inISR(node string) bool {
	for _, n := range r.ISR {
		if n == node {
			return true
		}
	}
	return false
}

// RoleChanged: the partition's metadata changed.
type RoleChanged struct{ Role Role }

// leads reports whether this node leads the partition.
func (a *Actor) leads() bool { return a.role.Leader == a.opt.Node }

// applyRole sets the write flow up for the role: a leader gets a Writer and
// a replica actor per ISR follower; a follower gets the apply core.
func (a *Actor) applyRole(ctx actor.Context, role Role) {
	if a.ending {
		// A stopping actor still takes the messages queued behind its
		// stop while it waits for its children. A replica actor started
		// now would never be told to stop, and the partition would never
		// finish stopping.
		return
	}
	if a.roleSet && role.Revision != 0 && role.Revision < a.role.Revision {
		return // stale: a newer state was applied already
	}
	wasLeader := a.roleSet && a.leads()
	if wasLeader && role.Leader == a.opt.Node && regained(a.role, role) {
		// Deposed and elected again in states this node never applied:
		// the first leadership ends here as it would have in between.
		a.stepDown(ctx)
		a.stopReplicas(ctx, nil)
		wasLeader = false
	}
	before := a.role.Catchup // the replicas catching up already, probed when they began
	if !wasLeader {
		before = nil
	}
	a.roleSet = true
	a.role = role
	a.progress.SetRole(role.followersOf(a.opt.Node), role.Catchup)
	if !a.leads() {
		if wasLeader {
			a.stepDown(ctx)
		}
		a.stopReplicas(ctx, nil)
		// A replica catching up applies the leader's writes too; it is
		// only not waited for.
		inISR := role.inISR(a.opt.Node) || role.catchingUp(a.opt.Node)
		a.follower = FollowRole(a.follower, role.EpochForWrite, inISR, role.LeaderSince, a.committedPosition(), a.recordByLogID)
		return
	}
	a.follower = nil
	// A replica newly catching up whose replica actor runs already is
	// probed now; one whose actor starts here is probed when its stream
	// opens (followerUp), so one out of reach, as a dead node is after a
	// failover, costs no read of the log.
	streaming := make(map[string]bool, len(a.replicas))
	for n := range a.replicas {
		streaming[n] = true
	}
	defer func() {
		for _, n := range role.Catchup {
			if !slices.Contains(before, n) && streaming[n] {
				a.probeCatchup(ctx, n)
			}
		}
	}()
	followers := role.followersOf(a.opt.Node)
	if !wasLeader {
		a.progress.Lead()
		a.replaceWriter(a.newWriter(role.EpochForWrite, followers, max(role.Replicas, 1)))
		a.applyDedupe()
		a.opt.Observer.BecameLeader(a.opt.Topic, a.opt.Partition)
	} else {
		a.perform(ctx, a.writer.SetFollowers(followers, role.EpochForWrite))
		a.syncsOnly(ctx, a.offsetMembers())
	}
	keep := make(map[string]bool, len(followers)+len(role.Catchup))
	for _, f := range append(append([]string(nil), followers...), role.Catchup...) {
		if f == a.opt.Node || keep[f] {
			continue
		}
		keep[f] = true
		if _, ok := a.replicas[f]; !ok && a.opt.Dial != nil {
			// A name of its own: one stopped for the same follower may not
			// have finished stopping, and still hold its name, when a
			// leadership is lost and regained at once.
			pid, err := ctx.SpawnNamed(a.instrument("replica", replica.Props(replica.Options{
				Topic: a.opt.Topic, Partition: a.opt.Partition, Node: f, Dial: a.opt.Dial, Attach: a.opt.Attach, OutOfReach: a.opt.OutOfReach, Logger: a.opt.Logger,
				FramesInFlight: a.opt.FramesInFlight, RedialMax: a.opt.RedialMax, OnFrame: a.frameSent(f),
			})), "replica-"+f+"-"+ctx.ActorSystem().ProcessRegistry.NextId())
			if err != nil {
				a.opt.Logger.Error("starting replica actor", "follower", f, "err", err)
				continue
			}
			a.replicas[f] = pid
		}
	}
	a.stopReplicas(ctx, keep)
}

// regained reports whether next names another leadership than prev. A role
// that names none (single node, or metadata written before leaderships
// were named) says nothing.
func regained(prev, next Role) bool {
	return prev.LeaderSession != "" && next.LeaderSession != "" && prev.LeaderSession != next.LeaderSession
}

// stepDown ends this node's leadership. Its writes in flight were never
// committed: their publishers hear so at once (the new leader's log decides
// whether they survive, as with any failed write), the log drops what they
// appended, and a fresh writer means their acks and timeouts, arriving
// later, find nothing to commit or roll back in the log the node now takes
// from the new leader. Publishes still queued were never written, and are
// refused as such (ErrDeposed): their node may send them on to the next
// leader.
func (a *Actor) stepDown(ctx actor.Context) {
	if end, _ := a.opt.Store.Committed(); a.opt.Store.Log.End() > end {
		if err := a.opt.Store.Log.Truncate(end); err != nil {
			a.opt.Logger.Error("dropping uncommitted writes after losing leadership", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		}
	}
	a.perform(ctx, a.writer.Deposed())
	for _, rep := range a.writer.Abandon(a.committedPosition(), ErrLeadershipEnded).Replies {
		rep.Token.(func(Reply))(rep)
	}
	a.answerHandOver(false)
	a.replaceWriter(a.newWriter(a.role.EpochForWrite, nil, max(a.role.Replicas, 1)))
	a.writer.Disable()
	a.progress.StepDown()
	a.dropJoinSync()
	a.syncsEnded(ctx)
}

// newWriter starts a write flow at the end of what is committed here.
func (a *Actor) newWriter(epoch int64, followers []string, replicas int) *Writer {
	cfg := a.opt.Writer
	cfg.Partition, cfg.Epoch, cfg.Followers, cfg.Replicas = a.opt.Partition, epoch, followers, replicas
	return NewWriter(cfg, a.committedPosition())
}

func (a *Actor) stopReplicas(ctx actor.Context, keep map[string]bool) {
	for n, pid := range a.replicas {
		if !keep[n] {
			ctx.Stop(pid)
			delete(a.replicas, n)
		}
	}
}
