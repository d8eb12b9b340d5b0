package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/partitamq/partita/cluster"
)

// ErrNotEnoughNodes refuses a topic with more replicas than live nodes.
var ErrNotEnoughNodes = errors.New("not enough live nodes for the replica count")

// errPlacementIncomplete: a topic's partitions are still being placed.
var errPlacementIncomplete = errors.New("placement incomplete")

// place assigns each partition of a new topic a leader and an ISR: replicas
// of one partition on distinct nodes, leaders spread over the nodes. It
// starts at a position derived from the topic's name so that topics do not
// all lead on the first node.
func place(topicName string, partitions, replicas int, nodes []string) ([]cluster.PartitionState, error) {
	if replicas > len(nodes) {
		return nil, fmt.Errorf("%w: %d replicas, %d nodes", ErrNotEnoughNodes, replicas, len(nodes))
	}
	start := int(crc32.ChecksumIEEE([]byte(topicName)) % uint32(len(nodes)))
	out := make([]cluster.PartitionState, partitions)
	for p := range out {
		isr := make([]string, replicas)
		for r := range isr {
			isr[r] = nodes[(start+p+r)%len(nodes)]
		}
		out[p] = cluster.PartitionState{
			Topic: topicName, Partition: int32(p), Leader: isr[0], ISR: isr,
			EpochForWrite: 1, Replicas: int32(replicas),
		}
	}
	return out, nil
}

// ensurePlacement creates the partition states of a topic that has none.
func (b *Broker) ensurePlacement(ctx context.Context, name string, partitions, replicas int) error {
	existing, err := b.cfg.Assignments.List(ctx, name)
	if err != nil {
		return err
	}
	if len(existing) == partitions {
		return nil
	}
	nodes, err := b.liveNodes(ctx)
	if err != nil {
		return err
	}
	states, err := place(name, partitions, replicas, nodes)
	if err != nil {
		return err
	}
	if err := b.cfg.Assignments.CreateAll(ctx, states); err != nil {
		return fmt.Errorf("placing %s: %w", name, err)
	}
	return nil
}

func (b *Broker) liveNodes(ctx context.Context) ([]string, error) {
	infos, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(infos))
	for _, n := range infos {
		ids = append(ids, n.ID)
	}
	if len(ids) == 0 {
		ids = []string{b.cfg.NodeID}
	}
	return ids, nil
}
