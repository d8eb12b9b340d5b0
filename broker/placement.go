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
	for _, st := range states {
		if _, _, err := b.cfg.Assignments.Create(ctx, st); err != nil {
			return fmt.Errorf("placing %s/%d: %w", name, st.Partition, err)
		}
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

// takesWrites: the leader has not disabled its writes and its ISR holds a
// majority of the replicas.
func takesWrites(st cluster.PartitionState) bool {
	return !st.WriteDisabled && len(st.ISR) > int(st.Replicas)/2
}

// Leaders is where a topic's partitions are led, cluster-wide, for
// nsqlookupd's /lookup: partition → the leader's registration.
type Leaders struct {
	Partitions, Replicas int
	Channels             []string
	ByPartition          map[int32]cluster.NodeInfo
}

// Lookup finds a topic's partition leaders across the cluster; found is
// false for a topic that does not exist. forWrite leaves out partitions that
// take no writes now (nsqlookupd's access=w).
func (b *Broker) Lookup(ctx context.Context, name string, forWrite bool) (Leaders, bool, error) {
	if t := b.Topic(name); t != nil && (t.Ephemeral || b.cfg.Assignments == nil) {
		self := cluster.NodeInfo{ID: b.cfg.NodeID}
		out := Leaders{Partitions: t.NumPartitions(), Replicas: 1, Channels: t.ChannelNames(), ByPartition: map[int32]cluster.NodeInfo{}}
		for p := range t.NumPartitions() {
			if t.Leads(p) {
				out.ByPartition[int32(p)] = self
			}
		}
		return out, true, nil
	}
	m, ok, err := b.meta.Topic(ctx, name)
	if err != nil || !ok {
		return Leaders{}, false, err
	}
	chans, err := b.meta.Channels(ctx, name)
	if err != nil {
		return Leaders{}, false, err
	}
	states, err := b.cfg.Assignments.List(ctx, name)
	if err != nil {
		return Leaders{}, false, err
	}
	nodes, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return Leaders{}, false, err
	}
	byID := make(map[string]cluster.NodeInfo, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	out := Leaders{Partitions: int(m.Partitions), Replicas: int(m.Replicas), ByPartition: map[int32]cluster.NodeInfo{}}
	for _, c := range chans {
		out.Channels = append(out.Channels, c.Name)
	}
	for _, st := range states {
		// A leader whose registration lapsed is not offered to clients.
		n, live := byID[st.Leader]
		if !live || forWrite && !takesWrites(st) {
			continue
		}
		out.ByPartition[st.Partition] = n
	}
	return out, true, nil
}
