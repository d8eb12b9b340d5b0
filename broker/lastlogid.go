package broker

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

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
