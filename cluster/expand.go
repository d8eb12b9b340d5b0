package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
)

var (
	// ErrPartitionsReduced: a topic never loses partitions (youzan's words).
	ErrPartitionsReduced = errors.New("the partition number can not be reduced")
	// ErrPartitionsUnchanged: the topic has the partitions asked for.
	ErrPartitionsUnchanged = errors.New("the topic already has that many partitions")
)

// maxExpandAttempts bounds ExpandTopic's re-reads: each is another
// writer's success on the topic, so only a storm of changes runs out.
const maxExpandAttempts = 5

// Placer places the partitions added to a topic, given the topic and the
// states of the partitions it has (and of any an earlier expand stored
// before it was cut short).
type Placer func(meta TopicMeta, existing []PartitionState, added []int32) ([]PartitionState, error)

// partitionsToAdd is which partitions an expand of meta to partitions
// places: those below the new count without a state. An expand cut short
// after storing some states (more than one transaction holds) leaves them
// for the retry to keep. It does no I/O.
func partitionsToAdd(meta TopicMeta, existing []PartitionState, partitions int32) ([]int32, error) {
	switch {
	case partitions < meta.Partitions:
		return nil, fmt.Errorf("%q has %d partitions: %w", meta.Name, meta.Partitions, ErrPartitionsReduced)
	case partitions == meta.Partitions:
		return nil, fmt.Errorf("%q has %d partitions: %w", meta.Name, meta.Partitions, ErrPartitionsUnchanged)
	}
	have := make(map[int32]bool, len(existing))
	for _, st := range existing {
		have[st.Partition] = true
	}
	var added []int32
	for p := meta.Partitions; p < partitions; p++ {
		if !have[p] {
			added = append(added, p)
		}
	}
	return added, nil
}

// ExpandTopic grows a topic to partitions: the states place gives the
// added partitions and the topic's new count are stored in one etcd
// transaction, which also checks that neither the topic nor any added
// partition changed since they were read, so a node sees the expand whole
// or not at all, and of two concurrent expands one wins. More partitions
// than a transaction holds go first in transactions of their own, each
// storing only partitions still without a state; nodes serve no partition
// beyond the topic's count, so they wait, unused, for the last
// transaction, and an expand cut short before it is finished by asking
// again. It returns the topic as stored.
func (s *MetaStore) ExpandTopic(ctx context.Context, a *Assignments, name string, partitions int32, place Placer) (TopicMeta, error) {
	if err := validName("topic", name); err != nil {
		return TopicMeta{}, err
	}
	for range maxExpandAttempts {
		meta, done, err := s.expandOnce(ctx, a, name, partitions, place)
		if err != nil || done {
			return meta, err
		}
	}
	return TopicMeta{}, fmt.Errorf("expand topic %q: changed concurrently %d times: %w", name, maxExpandAttempts, ErrConflict)
}

// expandOnce is one read, place and store; done is false when another
// writer got in between.
func (s *MetaStore) expandOnce(ctx context.Context, a *Assignments, name string, partitions int32, place Placer) (TopicMeta, bool, error) {
	resp, err := s.cli.Get(ctx, s.topicKey(name))
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("expand topic %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return TopicMeta{}, false, fmt.Errorf("expand topic %q: %w", name, ErrTopicNotFound)
	}
	kv := resp.Kvs[0]
	meta, err := decodeTopic(kv)
	if err != nil {
		return TopicMeta{}, false, err
	}
	existing, err := a.List(ctx, name)
	if err != nil {
		return TopicMeta{}, false, err
	}
	added, err := partitionsToAdd(meta, existing, partitions)
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("expand topic: %w", err)
	}
	states, err := place(meta, existing, added)
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("expand topic %q: %w", name, err)
	}
	puts, err := a.createOps(states)
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("expand topic %q: %w", name, err)
	}
	// The last transaction also carries the topic: one compare and one put.
	last := max(len(puts)-(maxTxnPartitions-1), 0)
	for chunk := range slices.Chunk(puts[:last], maxTxnPartitions) {
		if ok, err := a.createAll(ctx, chunk, nil, nil); err != nil || !ok {
			return TopicMeta{}, false, err
		}
	}
	meta.Partitions = partitions
	val, err := marshalTopic(meta)
	if err != nil {
		return TopicMeta{}, false, err
	}
	key := s.topicKey(name)
	ok, err := a.createAll(ctx, puts[last:],
		[]clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)},
		[]clientv3.Op{clientv3.OpPut(key, string(val))})
	return meta, ok, err
}

// createOp is one partition state to create.
type createOp struct {
	key string
	val []byte
}

func (a *Assignments) createOps(states []PartitionState) ([]createOp, error) {
	out := make([]createOp, len(states))
	for i, st := range states {
		if err := validPartitionState(st); err != nil {
			return nil, err
		}
		val, err := marshalPartition(st)
		if err != nil {
			return nil, err
		}
		out[i] = createOp{key: a.key(st.Topic, st.Partition), val: val}
	}
	return out, nil
}

// createAll stores every state of ops, none of which may exist yet, with
// the extra puts, if every extra compare holds: all or nothing.
func (a *Assignments) createAll(ctx context.Context, ops []createOp, cmps []clientv3.Cmp, puts []clientv3.Op) (bool, error) {
	for _, op := range ops {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(op.key), "=", 0))
		puts = append(puts, clientv3.OpPut(op.key, string(op.val)))
	}
	resp, err := a.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, fmt.Errorf("storing an expand: %w", err)
	}
	return resp.Succeeded, nil
}
