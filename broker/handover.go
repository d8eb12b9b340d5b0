package broker

import (
	"context"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// MovesPlanned tells this node's replicas of planned that their
// leaderships are about to move (topic.MovePlanned): each holds its
// writes, for at most hold, until none is in flight. It returns once
// every one answered or ctx ended, with those that drained; a partition
// this node does not lead in the epoch named answers not drained.
func (b *Broker) MovesPlanned(ctx context.Context, planned []cluster.PlannedMove, hold time.Duration) map[cluster.PartitionRef]bool {
	type answer struct {
		ref     cluster.PartitionRef
		drained bool
	}
	answers := make(chan answer, len(planned))
	drained := make(map[cluster.PartitionRef]bool, len(planned))
	asked := 0
	for _, m := range planned {
		pid := b.partitionPID(m.Ref.Topic, m.Ref.Partition)
		if pid == nil {
			continue
		}
		asked++
		b.system.Root.Send(pid, &topic.MovePlanned{Epoch: m.Epoch, For: hold, Reply: func(d bool) { answers <- answer{m.Ref, d} }})
	}
	for range asked {
		select {
		case a := <-answers:
			drained[a.ref] = a.drained
		case <-ctx.Done():
			return drained
		}
	}
	return drained
}

// MovesNotStored tells this node's replicas of refs that the moves
// planned for them were not stored: their holds end now.
func (b *Broker) MovesNotStored(refs []cluster.PartitionRef) {
	for _, ref := range refs {
		if pid := b.partitionPID(ref.Topic, ref.Partition); pid != nil {
			b.system.Root.Send(pid, &topic.MoveNotStored{})
		}
	}
}
