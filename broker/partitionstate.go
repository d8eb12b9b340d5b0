package broker

import (
	"context"
	"sync"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// The changes a partition leader makes to its own partition's state in
// etcd. Each is a compare-and-swap that names this node as the leader, so a
// leader that lost its office cannot change the state its successor owns;
// the node's changes asked at the same moment go in one batch.

// knownStates are the partition states the assignment watch delivered
// last, whole: this node's leaders' changes start from them
// (cluster.Changer.Known) rather than from a read of each.
type knownStates struct {
	mu sync.Mutex
	by map[cluster.PartitionRef]cluster.PartitionState
}

// set keeps each state the watch delivered unless it is older than the
// one kept; a deleted partition (no revision) is forgotten.
func (k *knownStates) set(states ...cluster.PartitionState) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, st := range states {
		if st.Revision == 0 {
			delete(k.by, st.Ref())
			continue
		}
		if k.by == nil {
			k.by = map[cluster.PartitionRef]cluster.PartitionState{}
		}
		if st.Revision >= k.by[st.Ref()].Revision {
			k.by[st.Ref()] = st
		}
	}
}

func (k *knownStates) get(ref cluster.PartitionRef) (cluster.PartitionState, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	st, ok := k.by[ref]
	return st, ok
}

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
