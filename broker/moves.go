package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partitamq/partita/cluster"
)

// ErrNotClustered: the node runs without etcd, so there is nothing to move
// replicas or leaderships between.
var ErrNotClustered = errors.New("moves need a cluster")

// MoveReplica records youzan's /topic/partition/move: the controller adds
// a replica of the partition on to, lets it catch up and join the ISR, and
// then removes the one on from (docs/operations.md, replica moves).
func (b *Broker) MoveReplica(ctx context.Context, topicName string, partition int32, from, to string) (cluster.PartitionState, error) {
	if b.cfg.Assignments == nil {
		return cluster.PartitionState{}, ErrNotClustered
	}
	st, err := b.cfg.Assignments.RequestMove(ctx, cluster.PartitionRef{Topic: topicName, Partition: partition},
		cluster.Move{Add: []string{to}, Remove: []string{from}})
	if errors.Is(err, cluster.ErrPartitionNotFound) {
		return st, ErrTopicNotFound
	}
	return st, err
}

// changeReplicas records the moves that bring every partition of a topic
// to r replicas, then the count new partitions are placed with.
func (b *Broker) changeReplicas(ctx context.Context, name string, r int) error {
	if b.cfg.Assignments == nil {
		return ErrNotClustered
	}
	if err := b.cfg.Assignments.ChangeReplicaCount(ctx, name, r); err != nil {
		return err
	}
	_, err := b.meta.UpdateTopic(ctx, name, func(m *cluster.TopicMeta) { m.Replicas = int32(r) })
	return err
}

// PartitionStates are the topic's partition states in etcd: who leads,
// who is in sync, who catches up, and the moves under way.
func (b *Broker) PartitionStates(ctx context.Context, name string) ([]cluster.PartitionState, error) {
	if b.cfg.Assignments == nil {
		return nil, nil
	}
	return b.cfg.Assignments.List(ctx, name)
}

// DrainNode marks a node to be drained (youzan's /cluster/node/remove):
// the controller moves every replica off it and places none on it.
func (b *Broker) DrainNode(ctx context.Context, node string) error {
	if b.cfg.Assignments == nil {
		return ErrNotClustered
	}
	states, err := b.cfg.Assignments.List(ctx, "")
	if err != nil {
		return err
	}
	live, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return err
	}
	draining, err := b.cfg.Assignments.Draining(ctx)
	if err != nil {
		return err
	}
	if blocked := cluster.DrainBlocked(states, live, draining, node); len(blocked) > 0 {
		return drainBlockedError(node, blocked)
	}
	return b.cfg.Assignments.Drain(ctx, node)
}

// drainBlockedError names the partitions that keep a drain from
// finishing, the first few of them, and what would unblock it.
func drainBlockedError(node string, blocked []cluster.PartitionRef) error {
	const shown = 5
	names := make([]string, 0, shown)
	for _, r := range blocked[:min(len(blocked), shown)] {
		names = append(names, fmt.Sprintf("%s/%d", r.Topic, r.Partition))
	}
	more := ""
	if len(blocked) > shown {
		more = fmt.Sprintf(" and %d more", len(blocked)-shown)
	}
	return fmt.Errorf("%w: draining %s: %d partitions (%s%s) have a replica on every other live node that is not drained, so none could take %s's; add a node, or lower their replica count first",
		cluster.ErrDrainBlocked, node, len(blocked), strings.Join(names, ", "), more, node)
}

// NodeLoads are the replicas and leaderships each node holds, and the
// nodes being drained, for /nodes.
func (b *Broker) NodeLoads(ctx context.Context) (map[string]cluster.NodeLoad, map[string]bool, error) {
	if b.cfg.Assignments == nil {
		return nil, nil, nil
	}
	states, err := b.cfg.Assignments.List(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	draining, err := b.cfg.Assignments.Draining(ctx)
	return cluster.Loads(states), draining, err
}

// ClusterStats reads from etcd what /cluster/stats summarizes; a node
// without etcd is a cluster of itself.
func (b *Broker) ClusterStats(ctx context.Context) (cluster.ClusterStats, error) {
	if b.cfg.Assignments == nil {
		self := cluster.NodeInfo{ID: b.cfg.NodeID}
		return cluster.Summarize(nil, []cluster.NodeInfo{self}, nil, cluster.Upgrade{}, self.ID), nil
	}
	states, err := b.cfg.Assignments.List(ctx, "")
	if err != nil {
		return cluster.ClusterStats{}, err
	}
	live, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return cluster.ClusterStats{}, err
	}
	draining, err := b.cfg.Assignments.Draining(ctx)
	if err != nil {
		return cluster.ClusterStats{}, err
	}
	upgrade, err := b.cfg.Assignments.Upgrade(ctx)
	if err != nil {
		return cluster.ClusterStats{}, err
	}
	controller, _, err := cluster.ElectedController(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return cluster.ClusterStats{}, err
	}
	return cluster.Summarize(states, live, draining, upgrade, controller), nil
}

// BeginUpgrade sets the rolling-upgrade mark (youzan's
// /cluster/upgrade/begin), keeping one set already.
func (b *Broker) BeginUpgrade(ctx context.Context) (cluster.Upgrade, error) {
	if b.cfg.Assignments == nil {
		return cluster.Upgrade{}, ErrNotClustered
	}
	return b.cfg.Assignments.BeginUpgrade(ctx, time.Now())
}

// EndUpgrade clears the rolling-upgrade mark (youzan's
// /cluster/upgrade/done).
func (b *Broker) EndUpgrade(ctx context.Context) error {
	if b.cfg.Assignments == nil {
		return ErrNotClustered
	}
	_, err := b.cfg.Assignments.EndUpgrade(ctx)
	return err
}
