package broker

import (
	"context"
	"errors"
	"fmt"
	"github.com/asynkron/protoactor-go/actor"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/messages"
)

// shrinker is how a partition leader removes followers from its ISR: a
// compare-and-swap of the partition's state, as Kafka's leaders do.
func (b *Broker) shrinker(topicName string, p int32) func(context.Context, []string) (topic.Role, error) {
	if b.cfg.Assignments == nil {
		return nil
	}
	return func(ctx context.Context, remove []string) (topic.Role, error) {
		st, err := b.changes.Change(ctx, cluster.ShrinkISRChange(cluster.PartitionRef{Topic: topicName, Partition: p}, b.cfg.NodeID, remove))
		return roleOf(st), err
	}
}

// disabler is how a partition leader records that it failed a write and
// takes none for now, so lookups with access=w leave the partition out.
func (b *Broker) disabler(topicName string, p int32) func(context.Context) error {
	if b.cfg.Assignments == nil {
		return nil
	}
	return func(ctx context.Context) error {
		_, err := b.changes.Change(ctx, cluster.DisableWritesChange(cluster.PartitionRef{Topic: topicName, Partition: p}, b.cfg.NodeID))
		return err
	}
}

// reenabler is how a partition leader that disabled its writes after a
// failed write takes writes again: a new epoch in the partition's state.
func (b *Broker) reenabler(topicName string, p int32) func(context.Context) (topic.Role, error) {
	if b.cfg.Assignments == nil {
		return nil
	}
	return func(ctx context.Context) (topic.Role, error) {
		st, err := b.changes.Change(ctx, cluster.ReenableWritesChange(cluster.PartitionRef{Topic: topicName, Partition: p}, b.cfg.NodeID))
		return roleOf(st), err
	}
}

// joiner is how a partition leader brings a caught-up replica into the ISR.
func (b *Broker) joiner(topicName string, p int32) func(context.Context, string) (topic.Role, error) {
	if b.cfg.Assignments == nil {
		return nil
	}
	return func(ctx context.Context, node string) (topic.Role, error) {
		st, err := b.changes.Change(ctx, cluster.JoinISRChange(cluster.PartitionRef{Topic: topicName, Partition: p}, b.cfg.NodeID, node))
		return roleOf(st), err
	}
}

// ApplyWrite hands a leader's write to the local follower partition; the
// replication server calls it for every write frame. It never waits: a
// write for a topic this node has not opened yet queues while the topic
// opens (a leader can write before this node has heard of the topic).
func (b *Broker) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	if b.opening.queueBehind(w, reply) {
		return
	}
	if b.partitionPID(w.GetTopic(), w.GetPartition()) == nil && b.Topic(w.GetTopic()) == nil {
		b.openThenApply(w, reply)
		return
	}
	b.applyWrite(w, reply)
}

// ApplyOffset hands a leader's channel offset to the local follower
// partition. One for a partition not here yet is dropped: the leader's
// channels report in full again when this replica joins the ISR.
func (b *Broker) ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck)) {
	pid := b.partitionPID(u.GetTopic(), u.GetPartition())
	if pid == nil {
		if reply != nil {
			reply(&messages.ReplicaAck{
				Topic: u.GetTopic(), Partition: u.GetPartition(), Channel: u.GetChannel(), OffsetSyncId: u.GetSyncId(),
				Kind: messages.ErrorKind_ERROR_KIND_TEMPORARY, Code: topic.ErrNotLeader.Code, Text: "no replica of the partition on this node",
			})
		}
		return
	}
	b.system.Root.Send(pid, &topic.OffsetArrived{Update: u, Reply: reply})
}

func (b *Broker) partitionPID(topicName string, p int32) *actor.PID {
	t := b.Topic(topicName)
	if t == nil {
		return nil
	}
	return t.Partition(int(p))
}

// leaveISRAfterRestart applies the restart rules of
// docs/replication.md#restarts to a topic's partitions. A follower that was
// in the ISR when it stopped may have lost writes it acknowledged (fsync is
// every --sync-every commits), so it leaves the ISR and rejoins through
// catch-up, unless the ISR would lose its majority; a leader with followers
// resigns, leaving the ISR on the same terms, so the controller elects the
// member with the most data (it may be this one); a copy of a partition
// placed elsewhere meanwhile goes.
func (b *Broker) leaveISRAfterRestart(ctx context.Context, name string) {
	if b.cfg.Assignments == nil || topic.IsEphemeral(name) {
		return
	}
	states, err := b.cfg.Assignments.List(ctx, name)
	if err != nil {
		return
	}
	for _, st := range states {
		if !hosts(st, b.cfg.NodeID) {
			b.dropStaleReplica(st)
			continue
		}
		if st.Leader == b.cfg.NodeID {
			if len(st.ISR) > 1 {
				if _, err := b.cfg.Assignments.ResignLeadership(ctx, name, st.Partition, b.cfg.NodeID); err != nil {
					b.log.Warn("resigning leadership after a restart", "topic", name, "partition", st.Partition, "err", err)
				} else {
					b.log.Info("resigned leadership after a restart: the ISR member with the most data leads", "topic", name, "partition", st.Partition)
				}
			}
			continue
		}
		if !slices.Contains(st.ISR, b.cfg.NodeID) {
			continue
		}
		_, err := b.cfg.Assignments.LeaveISR(ctx, name, st.Partition, b.cfg.NodeID)
		switch {
		case err == nil:
			b.log.Info("left the ISR after a restart, to rejoin by catch-up", "topic", name, "partition", st.Partition)
		case errors.Is(err, cluster.ErrISRTooSmall):
			b.log.Info("staying in the ISR after a restart: it would lose its majority", "topic", name, "partition", st.Partition)
		default:
			b.log.Warn("leaving the ISR after a restart", "topic", name, "partition", st.Partition, "err", err)
		}
	}
}

// dropStaleReplica deletes this node's copy of a partition the cluster
// placed elsewhere while the node was away (repair), once the partition has
// all its in-sync replicas without it
// (docs/replication.md#restart-stale-replica-dropped).
func (b *Broker) dropStaleReplica(st cluster.PartitionState) {
	dir := filepath.Join(b.topicDir(st.Topic), fmt.Sprint(st.Partition))
	if _, err := os.Stat(dir); err != nil || len(st.ISR) < int(st.Replicas) {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		b.log.Warn("deleting a replica placed elsewhere", "topic", st.Topic, "partition", st.Partition, "err", err)
		return
	}
	b.log.Info("deleted a replica placed elsewhere while this node was away", "topic", st.Topic, "partition", st.Partition)
}

// followAssignments keeps partition actors in step with their states in
// etcd: a changed leader or ISR becomes a RoleChanged, and a topic this node
// did not know is opened when it gets a replica here.
func (b *Broker) followAssignments(ctx context.Context) {
	if b.cfg.Assignments == nil {
		return
	}
	for st := range b.cfg.Assignments.Watch(ctx, "") {
		key := partitionKey{st.Topic, st.Partition}
		b.leaderMoved(key, st.Leader)
		if st.Leader == "" && st.Revision == 0 {
			b.leaderOf.Delete(key)
			continue // deleted: followTopicDeletions drops the topic
		}
		b.leaderOf.Store(key, st.Leader)
		t := b.Topic(st.Topic)
		if t == nil {
			if hosts(st, b.cfg.NodeID) {
				b.openFromMeta(ctx, st.Topic)
			}
			continue
		}
		b.roleChanged(t, st)
	}
}

func (b *Broker) roleChanged(t *Topic, st cluster.PartitionState) {
	p := int(st.Partition)
	if p >= t.NumPartitions() {
		return
	}
	pid := t.Partition(p)
	switch hosted := hosts(st, b.cfg.NodeID); {
	case pid == nil && hosted:
		var err error
		if pid, err = b.gainPartition(t, st); err != nil {
			b.log.Warn("starting a partition replica placed on this node", "topic", t.Name, "partition", p, "err", err)
			return
		}
	case pid != nil && !hosted:
		b.losePartition(t, st.Partition, pid)
		return
	case pid == nil:
		return
	}
	leads := st.Leader == b.cfg.NodeID
	was := t.leads[p].Swap(leads)
	b.system.Root.Send(pid, &topic.RoleChanged{Role: roleOf(st)})
	if was != leads {
		b.leadershipMoved(t, int32(p), leads)
	}
}

// gainPartition starts a replica the cluster placed on this node while the
// topic was open here (repair moved a lost replica here); it catches up
// from the leader, with the topic's channels.
func (b *Broker) gainPartition(t *Topic, st cluster.PartitionState) (*actor.PID, error) {
	b.mu.Lock()
	pid := t.Partition(int(st.Partition))
	if pid == nil {
		var err error
		if pid, err = b.startPartition(t, st.Partition, roleOf(st)); err != nil {
			b.mu.Unlock()
			return nil, err
		}
		t.parts[st.Partition].Store(pid)
	}
	b.mu.Unlock()
	for _, name := range t.ChannelNames() {
		if _, err := t.channelPIDs(b.system, name); err != nil {
			b.log.Warn("opening channel", "topic", t.Name, "channel", name, "err", err)
		}
	}
	b.log.Info("replica placed on this node", "topic", t.Name, "partition", st.Partition)
	return pid, nil
}

// losePartition stops and deletes a replica the cluster no longer places on
// this node (repair replaced it while this node was away).
func (b *Broker) losePartition(t *Topic, p int32, pid *actor.PID) {
	if t.leads[p].Swap(false) {
		b.leadershipMoved(t, p, false)
	}
	t.parts[p].Store(nil)
	if err := b.system.Root.StopFuture(pid).Wait(); err != nil {
		b.log.Warn("stopping a replica moved elsewhere", "topic", t.Name, "partition", p, "err", err)
	}
	if err := os.RemoveAll(filepath.Join(b.topicDir(t.Name), fmt.Sprint(p))); err != nil {
		b.log.Warn("deleting a replica moved elsewhere", "topic", t.Name, "partition", p, "err", err)
	}
	b.log.Info("replica moved off this node", "topic", t.Name, "partition", p)
}

func (b *Broker) openFromMeta(ctx context.Context, name string) {
	m, ok, err := b.meta.Topic(ctx, name)
	if err != nil || !ok {
		return
	}
	if _, err := b.start(ctx, m); err != nil && !errors.Is(err, errPlacementIncomplete) {
		b.log.Warn("opening a topic placed on this node", "topic", name, "err", err)
	}
}

// LastLogID is this node's last committed LogID of a partition, for the
// controller choosing a new leader.
func (b *Broker) LastLogID(topicName string, p int32) (int64, bool) {
	ref := cluster.PartitionRef{Topic: topicName, Partition: p}
	id, ok := b.LastLogIDs([]cluster.PartitionRef{ref}, 5*time.Second)[ref]
	return id, ok
}

// LastLogIDs is this node's last committed LogID of each partition given
// that it holds, for the controller electing leaders after a node was lost.
// Every partition is asked at once and given wait to answer, so one busy
// partition delays the others by no more than that; one that does not
// answer in time is left out, as is one this node does not hold.
func (b *Broker) LastLogIDs(parts []cluster.PartitionRef, wait time.Duration) map[cluster.PartitionRef]int64 {
	futures := make([]*actor.Future, len(parts))
	for i, ref := range parts {
		if pid := b.partitionPID(ref.Topic, ref.Partition); pid != nil {
			futures[i] = b.system.Root.RequestFuture(pid, &topic.StatsRequested{}, wait)
		}
	}
	ids := make(map[cluster.PartitionRef]int64, len(parts))
	for i, f := range futures {
		if f == nil {
			continue
		}
		if res, err := f.Result(); err == nil {
			ids[parts[i]] = res.(*topic.Stats).LastLogID
		}
	}
	return ids
}

// followChannels keeps this node's channels in step with the cluster's:
// a channel created, paused, made ordered or deleted on any node is so here.
func (b *Broker) followChannels(ctx context.Context) {
	for ev := range b.meta.WatchChannels(ctx) {
		t := b.Topic(ev.Channel.Topic)
		if t == nil {
			continue
		}
		name := ev.Channel.Name
		if ev.Deleted {
			if t.HasChannel(name) {
				b.dropChannel(t, name)
			}
			continue
		}
		if _, err := t.channelPIDs(b.system, name); err != nil {
			b.log.Warn("opening a channel created elsewhere", "topic", t.Name, "channel", name, "err", err)
			continue
		}
		t.sendAll(b.system, name, &channel.PauseChanged{Paused: ev.Channel.Paused})
		t.sendAll(b.system, name, &channel.OrderChanged{Ordered: ev.Channel.Ordered})
	}
}

// followTopicDeletions drops a topic deleted through any node, exactly the
// incarnation that was deleted.
func (b *Broker) followTopicDeletions(ctx context.Context) {
	for m := range b.meta.WatchTopicDeletions(ctx) {
		t := b.Topic(m.Name)
		if t == nil || t.created != m.CreatedUnixNano {
			continue
		}
		if err := b.dropTopic(t); err != nil {
			b.log.Warn("removing a deleted topic's files", "topic", m.Name, "err", err)
		}
	}
}
