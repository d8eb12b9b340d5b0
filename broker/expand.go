package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// ErrCannotExpand refuses an expand the topic cannot take: an ephemeral
// topic, or a node without etcd.
var ErrCannotExpand = errors.New("only a topic kept in etcd can have partitions added")

// ExpandTopic grows a topic to partitions partitions, cluster-wide
// (docs/replication.md#expand). The new partitions are placed as at
// creation over the live nodes, and the topic's new count and their
// states are stored in etcd at once; every node then starts the ones it
// holds, with the topic's channels, through its watches.
func (b *Broker) ExpandTopic(ctx context.Context, name string, partitions int) (cluster.TopicMeta, error) {
	if partitions > topic.MaxPartitions {
		return cluster.TopicMeta{}, fmt.Errorf("partition_num %d above %d", partitions, topic.MaxPartitions)
	}
	if b.cfg.Assignments == nil || topic.IsEphemeral(name) {
		return cluster.TopicMeta{}, ErrCannotExpand
	}
	nodes, err := b.liveNodes(ctx)
	if err != nil {
		return cluster.TopicMeta{}, err
	}
	m, err := b.meta.ExpandTopic(ctx, b.cfg.Assignments, name, int32(partitions),
		func(m cluster.TopicMeta, existing []cluster.PartitionState, added []int32) ([]cluster.PartitionState, error) {
			return placeMore(name, added, int(m.Replicas), nodes, existing)
		})
	if err != nil {
		b.log.Info("topic not expanded", "topic", name, "partitions", partitions, "err", err)
		return cluster.TopicMeta{}, err
	}
	// This node's /lookup then answers with the new count at once (from
	// etcd, until the watches bring the new partitions' states).
	b.setTopic(cluster.TopicEvent{Topic: m})
	b.log.Info("topic expanded", "topic", name, "partitions", m.Partitions)
	return m, nil
}

// topicGrew starts what an expand placed on this node. The topic and
// partition watches deliver apart: a partition's state that arrived
// before the topic's new count found no slot and was passed over, so
// the states are read again once the topic has grown.
func (b *Broker) topicGrew(ctx context.Context, t *Topic, m cluster.TopicMeta) {
	b.roleMu.Lock()
	defer b.roleMu.Unlock()
	b.mu.Lock()
	had := t.NumPartitions()
	grew := t.grow(int(m.Partitions))
	b.mu.Unlock()
	if !grew || b.cfg.Assignments == nil {
		return
	}
	b.log.Info("topic expanded", "topic", t.Name, "partitions", m.Partitions)
	states, err := b.cfg.Assignments.List(ctx, t.Name)
	if err != nil {
		b.log.Warn("reading the partitions an expand added", "topic", t.Name, "err", err)
		return
	}
	for _, st := range states {
		// One started already came through the assignment watch, which
		// brings its later states too.
		if int(st.Partition) >= had && t.Partition(int(st.Partition)) == nil && b.Topic(t.Name) == t {
			b.roleChanged(t, st)
		}
	}
}

// channelsOf is a topic's channels as the metadata has them, or, without
// etcd, as this node knows them.
func (b *Broker) channelsOf(t *Topic) []cluster.ChannelMeta {
	ctx, cancel := context.WithTimeout(context.Background(), openWait)
	defer cancel()
	chans, err := b.meta.Channels(ctx, t.Name)
	if err == nil {
		return chans
	}
	b.log.Warn("reading the channels of a topic", "topic", t.Name, "err", err)
	chans = nil
	for _, name := range t.ChannelNames() {
		chans = append(chans, cluster.ChannelMeta{Topic: t.Name, Name: name})
	}
	return chans
}

// openChannelsOn registers the channels a partition this node gained
// while the topic was open here opened as it started, and applies their
// pause and order. The partition's actor opened them before it could take
// a publish, so on a partition an expand added, every channel starts at
// its first message.
func (b *Broker) openChannelsOn(t *Topic, p int32, pid *actor.PID, chans []cluster.ChannelMeta) {
	for _, c := range chans {
		res, err := b.system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: c.Name}, 10*time.Second).Result()
		ch, _ := res.(*topic.ChannelReady)
		if err != nil || ch == nil || ch.PID == nil {
			b.log.Warn("opening a channel on a partition placed here", "topic", t.Name, "partition", p, "channel", c.Name, "err", err)
			continue
		}
		t.mu.Lock()
		t.channels[c.Name] = true
		t.mu.Unlock()
		if c.Paused {
			b.system.Root.Send(ch.PID, &channel.PauseChanged{Paused: true})
		}
		if c.Ordered {
			b.system.Root.Send(ch.PID, &channel.OrderChanged{Ordered: true})
		}
		if c.Skipped {
			b.system.Root.Send(ch.PID, &channel.SkipChanged{Skipped: true})
		}
		for _, m := range limitsOf(c) {
			b.system.Root.Send(ch.PID, m)
		}
	}
}

// startPlaced starts this node's replica of partition p of an open topic
// that etcd places here before the watches have said so, because its
// leader wrote to it first: refused, the write would count as this
// follower failing it and drop it from a new partition's ISR.
func (b *Broker) startPlaced(ctx context.Context, t *Topic, p int32) {
	if b.cfg.Assignments == nil {
		return
	}
	if int(p) >= t.NumPartitions() {
		if m, ok, err := b.meta.Topic(ctx, t.Name); err == nil && ok && m.CreatedUnixNano == t.created {
			b.topicGrew(ctx, t, m)
		}
		return
	}
	st, ok, err := b.cfg.Assignments.Get(ctx, t.Name, p)
	if err != nil || !ok {
		return
	}
	b.roleMu.Lock()
	defer b.roleMu.Unlock()
	if b.Topic(t.Name) == t && t.Partition(int(p)) == nil {
		b.roleChanged(t, st)
	}
}
