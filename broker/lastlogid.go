package broker

import (
	"github.com/partitamq/partita/cluster"
)

// LastLogID is this node's last committed LogID of a partition, for the
// controller choosing a new leader.
func (b *Broker) LastLogID(topicName string, p int32) (int64, bool) {
	ref := cluster.PartitionRef{Topic: topicName, Partition: p}
	id, ok := b.LastLogIDs([]cluster.PartitionRef{ref})[ref]
	return id, ok
}

// LastLogIDs is this node's last committed LogID of each partition given
// that it holds, for the controller electing leaders after a node was lost.
// It reads each partition's commit log beside its actor rather than asking
// the actor, which a failover keeps busy. A write appends to the commit log
// before it is acknowledged, so every write the partition acknowledged is
// counted; one being appended meanwhile may or may not be, as with an
// answer from the actor just before or after it.
func (b *Broker) LastLogIDs(parts []cluster.PartitionRef) map[cluster.PartitionRef]int64 {
	ids := make(map[cluster.PartitionRef]int64, len(parts))
	for _, ref := range parts {
		t := b.Topic(ref.Topic)
		if t == nil {
			continue
		}
		slot := t.slot(int(ref.Partition))
		if slot == nil || slot.pid.Load() == nil {
			continue
		}
		if store := slot.store.Load(); store != nil {
			ids[ref] = store.Commits.LastLogID()
		}
	}
	return ids
}
