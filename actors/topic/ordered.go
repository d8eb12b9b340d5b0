package topic

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
)

// An ordered channel's FIN succeeds only when every ISR member has the new
// confirmed offset (docs/replication.md#ordered-channel). The partition
// actor sends the offset with a sync ID to each follower and answers the
// channel when all acknowledged, or fails it when one is down, refuses, or
// the write timeout passes.

// offsetSync is one ordered FIN waiting for the followers.
type offsetSync struct {
	channel *actor.PID
	fin     *channel.OrderedFinished
	pending map[string]bool
	started time.Time
	done    func(error) // set for a setoffset, instead of channel and fin
	// join: a position a joining replica must hold before it joins
	// (join.go), instead of channel and fin.
	join bool
}

// ErrOffsetNotReplicated fails an ordered FIN.
var ErrOffsetNotReplicated = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "not every ISR member acknowledged the offset"}

func (a *Actor) orderedFinished(ctx actor.Context, m *channel.OrderedFinished) {
	ch, ok := a.channels[m.Channel]
	if !ok {
		return
	}
	if !a.leads() {
		ctx.Send(ch, &channel.OrderedSynced{ConsumerID: m.ConsumerID, ID: m.ID, Out: m.Out, Err: ErrNotLeader})
		return
	}
	followers := a.offsetMembers()
	if len(followers) == 0 {
		ctx.Send(ch, &channel.OrderedSynced{ConsumerID: m.ConsumerID, ID: m.ID, Out: m.Out})
		return
	}
	a.syncSeq++
	s := &offsetSync{channel: ch, fin: m, pending: map[string]bool{}, started: a.opt.Now()}
	u := &messages.ChannelOffsetUpdate{
		Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: m.Channel,
		VOffset: m.Update.Offset, VCnt: m.Update.Count, Flush: true, SyncId: a.syncSeq,
		EpochForWrite: a.offsetEpoch(),
	}
	for _, f := range followers {
		s.pending[f] = true
		if pid, ok := a.replicas[f]; ok {
			ctx.Send(pid, &replica.ReplicateOffset{Update: u})
		}
	}
	a.syncs[a.syncSeq] = s
}

// offsetAcked records a follower's answer to a synced offset.
func (a *Actor) offsetAcked(ctx actor.Context, node string, ack *messages.ReplicaAck) {
	s, ok := a.syncs[ack.GetOffsetSyncId()]
	if !ok {
		return
	}
	if ack.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		a.finishSync(ctx, ack.GetOffsetSyncId(), ErrOffsetNotReplicated)
		return
	}
	delete(s.pending, node)
	if len(s.pending) == 0 {
		a.finishSync(ctx, ack.GetOffsetSyncId(), nil)
	}
}

// syncsWithout fails the syncs waiting on a follower that went down.
func (a *Actor) syncsWithout(ctx actor.Context, node string) {
	for id, s := range a.syncs {
		if s.pending[node] {
			a.finishSync(ctx, id, ErrOffsetNotReplicated)
		}
	}
}

// syncsOnly stops the syncs waiting on nodes not among followers: the ISR
// shrank, or a move or a lower replica count took them out of it (and the
// node deletes its copy rather than answer). What the ISR holds is what an
// ordered FIN needs.
func (a *Actor) syncsOnly(ctx actor.Context, followers []string) {
	for id, s := range a.syncs {
		for n := range s.pending {
			if !slices.Contains(followers, n) {
				delete(s.pending, n)
			}
		}
		if len(s.pending) == 0 {
			a.finishSync(ctx, id, nil)
		}
	}
}

// syncsEnded fails the ordered FINs and setoffsets still waiting for
// followers when the leadership ends: the next leader may not hold their
// positions. Left waiting, one was answered only later, at the write
// timeout or by a follower's late ack, while this node, leading again at
// once, had already delivered again what its consumer had FINished, with
// no E_FIN_FAILED before it.
func (a *Actor) syncsEnded(ctx actor.Context) {
	for id := range a.syncs {
		a.finishSync(ctx, id, ErrNotLeader)
	}
}

// expireSyncs fails ordered FINs older than the write timeout.
func (a *Actor) expireSyncs(ctx actor.Context) {
	timeout := a.opt.Writer.WriteTimeout
	if timeout <= 0 {
		return
	}
	for id, s := range a.syncs {
		if a.opt.Now().Sub(s.started) >= timeout {
			a.finishSync(ctx, id, ErrOffsetNotReplicated)
		}
	}
}

func (a *Actor) finishSync(ctx actor.Context, id int64, err error) {
	s := a.syncs[id]
	delete(a.syncs, id)
	if s.join {
		if err == nil && a.joining != nil {
			a.joining.syncs--
		}
		a.joinerSynced(ctx, err)
		return
	}
	if s.done != nil {
		s.done(err)
		return
	}
	ctx.Send(s.channel, &channel.OrderedSynced{ConsumerID: s.fin.ConsumerID, ID: s.fin.ID, Out: s.fin.Out, Err: err})
}
