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
// of one partition on distinct nodes and in as many zones as there are,
// leaders spread over the nodes. It starts at a position derived from the
// topic's name so that topics do not all lead on the first node. Each first
// leader is its partition's preferred replica, so the leader balance
// restores this spread after failovers.
func place(topicName string, partitions, replicas int, nodes []cluster.NodeInfo) ([]cluster.PartitionState, error) {
	if replicas > len(nodes) {
		return nil, fmt.Errorf("%w: %d replicas, %d nodes", ErrNotEnoughNodes, replicas, len(nodes))
	}
	all := make([]int32, partitions)
	for p := range all {
		all[p] = int32(p)
	}
	return placeFrom(topicName, all, replicas, cluster.InterleaveZones(nodes), nameStart(topicName, len(nodes))), nil
}

// nameStart is where a topic's round of the nodes begins.
func nameStart(topicName string, nodes int) int {
	return int(crc32.ChecksumIEEE([]byte(topicName)) % uint32(nodes))
}

// placeFrom places partitions round-robin over order from start:
// partition p is led by order[start+p], with its other replicas spread by
// zone after it (cluster.SpreadReplicas).
func placeFrom(topicName string, partitions []int32, replicas int, order []cluster.NodeInfo, start int) []cluster.PartitionState {
	out := make([]cluster.PartitionState, len(partitions))
	for i, p := range partitions {
		isr := cluster.SpreadReplicas(order, start+int(p), replicas)
		out[i] = cluster.PartitionState{
			Topic: topicName, Partition: p, Leader: isr[0], ISR: isr,
			EpochForWrite: 1, LeaderSession: cluster.Leadership(isr[0], 1), Replicas: int32(replicas), Preferred: isr[0],
		}
	}
	return out
}

// placeMore places partitions added to a topic that has the partitions
// existing, as at creation (placeFrom), except that each is led by the
// live node leading the fewest of the topic's partitions, the first in the
// topic's round on a tie. On the nodes the topic was created on that is
// the round where it left off, as if the topic had been created with all
// its partitions; a node added since gets the new leaders first. It does
// no I/O.
func placeMore(topicName string, added []int32, replicas int, nodes []cluster.NodeInfo, existing []cluster.PartitionState) ([]cluster.PartitionState, error) {
	if replicas > len(nodes) {
		return nil, fmt.Errorf("%w: %d replicas, %d nodes", ErrNotEnoughNodes, replicas, len(nodes))
	}
	order := cluster.InterleaveZones(nodes)
	origin := nameStart(topicName, len(nodes))
	leads := map[string]int{}
	for _, st := range existing {
		leads[st.Leader]++
	}
	out := make([]cluster.PartitionState, len(added))
	for i, p := range added {
		lead := (origin + int(p)) % len(order)
		for k := range order {
			if at := (origin + int(p) + k) % len(order); leads[order[at].ID] < leads[order[lead].ID] {
				lead = at
			}
		}
		out[i] = placeFrom(topicName, []int32{p}, replicas, order, lead-int(p))[0]
		leads[out[i].Leader]++
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

func (b *Broker) liveNodes(ctx context.Context) ([]cluster.NodeInfo, error) {
	infos, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return nil, err
	}
	if len(infos) == 0 {
		infos = []cluster.NodeInfo{{ID: b.cfg.NodeID}}
	}
	return infos, nil
}
