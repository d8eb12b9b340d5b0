package broker

import (
	"context"

	"github.com/partitamq/partita/cluster"
)

// MoveLeader hands a partition's leadership to another ISR member through
// the controller (docs/replication.md#leader-move) and returns the
// partition's state once the controller decided.
func (b *Broker) MoveLeader(ctx context.Context, topicName string, partition int32, from, to string) (cluster.PartitionState, error) {
	if b.cfg.Assignments == nil {
		return cluster.PartitionState{}, ErrNotClustered
	}
	return b.cfg.Assignments.MoveLeader(ctx, cluster.PartitionRef{Topic: topicName, Partition: partition}, from, to)
}
