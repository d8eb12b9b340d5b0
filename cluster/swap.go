package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PartitionRef names one partition of one topic.
type PartitionRef struct {
	Topic     string
	Partition int32
}

func (r PartitionRef) String() string { return partitionName(r.Topic, r.Partition) }

// Ref names the partition st is the state of.
func (st PartitionState) Ref() PartitionRef {
	return PartitionRef{Topic: st.Topic, Partition: st.Partition}
}

// maxTxnPartitions is how many partitions one swap transaction carries. etcd
// refuses a transaction holding more than --max-txn-ops (128 by default)
// compares, or operations in either branch; each partition takes one compare,
// one put and one get. A member configured lower makes the transaction split.
const maxTxnPartitions = 128

// swapParallelism is how many swap transactions are in flight at once: etcd
// applies them in turn, but overlapping them lets its raft carry several in
// one proposal round and hides the round trips.
const swapParallelism = 4

// SwapResult is what CompareAndSwapAll did with one state, as CompareAndSwap
// would have returned it: the stored state with its new Revision, or an
// error and, on ErrConflict, the state stored now.
type SwapResult struct {
	Stored PartitionState
	Err    error
}

// CompareAndSwapAll is CompareAndSwap for many partitions in few
// transactions. Each state is stored only if its partition is still at its
// Revision; one changed concurrently fails alone, with ErrConflict, while
// the others of its transaction are tried again without it. The results are
// in the order of states; a partition given twice fails the second time.
func (a *Assignments) CompareAndSwapAll(ctx context.Context, states []PartitionState) []SwapResult {
	results := make([]SwapResult, len(states))
	var pending []pendingSwap
	seen := make(map[PartitionRef]bool, len(states))
	for i, st := range states {
		p, err := a.pendingSwap(i, st)
		if err == nil && seen[st.Ref()] {
			err = fmt.Errorf("swap %s: given twice in one batch", st.Ref())
		}
		if err != nil {
			results[i].Err = err
			continue
		}
		seen[st.Ref()] = true
		pending = append(pending, p)
	}
	var wg sync.WaitGroup
	slots := make(chan struct{}, swapParallelism)
	for batch := range slices.Chunk(pending, maxTxnPartitions) {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			a.swapBatch(ctx, batch, results)
		})
	}
	wg.Wait()
	return results
}

// pendingSwap is one state of a CompareAndSwapAll call, encoded.
type pendingSwap struct {
	index int // in the caller's states and results
	state PartitionState
	key   string
	value []byte
}

func (a *Assignments) pendingSwap(i int, st PartitionState) (pendingSwap, error) {
	if err := validPartitionState(st); err != nil {
		return pendingSwap{}, fmt.Errorf("swap partition state: %w", err)
	}
	if st.Revision <= 0 {
		return pendingSwap{}, fmt.Errorf("swap %s: revision %d was not read from etcd; use Create for a new partition", st.Ref(), st.Revision)
	}
	val, err := marshalPartition(st)
	if err != nil {
		return pendingSwap{}, fmt.Errorf("swap %s: %w", st.Ref(), err)
	}
	return pendingSwap{index: i, state: st, key: a.key(st.Topic, st.Partition), value: val}, nil
}

// swapBatch stores batch in one transaction. When a compare fails, the
// transaction's else branch has read every key, so the partitions changed
// concurrently are known and answered at once, and the rest are tried again:
// each retry drops at least one partition, so the loop ends.
func (a *Assignments) swapBatch(ctx context.Context, batch []pendingSwap, results []SwapResult) {
	for len(batch) > 0 {
		resp, err := a.swapTxn(ctx, batch)
		if tooLarge(err) && len(batch) > 1 {
			half := len(batch) / 2
			a.swapBatch(ctx, batch[:half], results)
			a.swapBatch(ctx, batch[half:], results)
			return
		}
		if err != nil {
			for _, p := range batch {
				results[p.index].Err = fmt.Errorf("swap %s: %w", p.state.Ref(), err)
			}
			return
		}
		if resp.Succeeded {
			for _, p := range batch {
				results[p.index].Stored, results[p.index].Err = unmarshalPartition(p.value, resp.Header.Revision)
			}
			return
		}
		batch = a.conflicts(batch, resp, results)
	}
}

func (a *Assignments) swapTxn(ctx context.Context, batch []pendingSwap) (*clientv3.TxnResponse, error) {
	cmps := make([]clientv3.Cmp, len(batch))
	puts := make([]clientv3.Op, len(batch))
	gets := make([]clientv3.Op, len(batch))
	for i, p := range batch {
		cmps[i] = clientv3.Compare(clientv3.ModRevision(p.key), "=", p.state.Revision)
		puts[i] = clientv3.OpPut(p.key, string(p.value))
		gets[i] = clientv3.OpGet(p.key)
	}
	return a.cli.Txn(ctx).If(cmps...).Then(puts...).Else(gets...).Commit()
}

// tooLarge reports a transaction the member refused for its size, which a
// smaller one may pass.
func tooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge)
}

// conflicts answers the partitions of a failed transaction whose compare
// failed, from what its else branch read, and returns the others.
func (a *Assignments) conflicts(batch []pendingSwap, resp *clientv3.TxnResponse, results []SwapResult) []pendingSwap {
	var held []pendingSwap
	for i, p := range batch {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		switch {
		case len(kvs) == 0:
			results[p.index].Err = fmt.Errorf("swap %s at revision %d: %w: %w", p.state.Ref(), p.state.Revision, ErrConflict, ErrPartitionNotFound)
		case kvs[0].ModRevision == p.state.Revision:
			held = append(held, p)
		default:
			current, err := decodePartition(kvs[0])
			if err == nil {
				err = fmt.Errorf("swap %s at revision %d: now at %d: %w", p.state.Ref(), p.state.Revision, current.Revision, ErrConflict)
			}
			results[p.index] = SwapResult{Stored: current, Err: err}
		}
	}
	if len(held) == len(batch) {
		// Every compare held yet the transaction failed: etcd answered
		// something this code does not understand, and retrying would
		// not end.
		for _, p := range held {
			results[p.index].Err = fmt.Errorf("swap %s: transaction failed with every compare holding", p.state.Ref())
		}
		return nil
	}
	return held
}
