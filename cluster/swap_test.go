package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// txnCounter wraps a client's KV to count the transactions that write
// partition states, and to refuse those writing more than limit of them (0:
// no limit) as a member with a lower --max-txn-ops would.
type txnCounter struct {
	clientv3.KV
	limit int
	// beforeWrite, if set, runs before each partition-writing transaction
	// commits, given how many committed before it.
	beforeWrite func(n int)

	mu    sync.Mutex
	txns  []int // partitions written by each transaction, in order
	every int   // transactions committed, reads too
}

// countTxns gives a fresh client of the test's etcd a txnCounter, so no
// other client's requests are counted.
func countTxns(t *testing.T, addr string, limit int) (*clientv3.Client, *txnCounter) {
	t.Helper()
	cli := newTestClient(t, addr)
	k := &txnCounter{KV: cli.KV, limit: limit}
	cli.KV = k
	return cli, k
}

func (k *txnCounter) Txn(ctx context.Context) clientv3.Txn {
	return &countedTxn{Txn: k.KV.Txn(ctx), k: k}
}

// all is the transactions so far, reads too.
func (k *txnCounter) all() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.every
}

// count is the partition-writing transactions so far.
func (k *txnCounter) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.txns)
}

type countedTxn struct {
	clientv3.Txn
	k    *txnCounter
	puts int
}

func (t *countedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	t.Txn = t.Txn.If(cs...)
	return t
}

func (t *countedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		if op.IsPut() && strings.Contains(string(op.KeyBytes()), "/partitions/") {
			t.puts++
		}
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *countedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	t.Txn = t.Txn.Else(ops...)
	return t
}

func (t *countedTxn) Commit() (*clientv3.TxnResponse, error) {
	t.k.mu.Lock()
	t.k.every++
	t.k.mu.Unlock()
	if t.puts > 0 {
		if t.k.limit > 0 && t.puts > t.k.limit {
			return nil, rpctypes.ErrTooManyOps
		}
		t.k.mu.Lock()
		n := len(t.k.txns)
		t.k.txns = append(t.k.txns, t.puts)
		t.k.mu.Unlock()
		if t.k.beforeWrite != nil {
			t.k.beforeWrite(n)
		}
	}
	return t.Txn.Commit()
}

// createPartitions stores n partitions of topic t, led by a with ISR a b c,
// and returns them as read back.
func createPartitions(t *testing.T, a *Assignments, n int) []PartitionState {
	t.Helper()
	for p := range int32(n) {
		mustCreatePartition(t, a, PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3})
	}
	states, err := a.List(context.Background(), "t")
	if err != nil || len(states) != n {
		t.Fatalf("listing the partitions created: %d of %d, %v", len(states), n, err)
	}
	return states
}

func bumpEpochs(states []PartitionState) []PartitionState {
	next := slices.Clone(states)
	for i := range next {
		next[i].EpochForWrite++
	}
	return next
}

// expectStored checks every result succeeded with the state given, at the
// revision etcd now holds.
func expectStored(t *testing.T, a *Assignments, want []PartitionState, results []SwapResult, skip ...int) {
	t.Helper()
	for i, res := range results {
		if slices.Contains(skip, i) {
			continue
		}
		if res.Err != nil {
			t.Fatalf("partition %d: %v", want[i].Partition, res.Err)
		}
		got, _, err := a.Get(context.Background(), want[i].Topic, want[i].Partition)
		if err != nil || !reflect.DeepEqual(got, res.Stored) || got.EpochForWrite != want[i].EpochForWrite {
			t.Fatalf("partition %d: stored %+v, returned %+v, want epoch %d (%v)", want[i].Partition, got, res.Stored, want[i].EpochForWrite, err)
		}
	}
}

// 300 partitions take three transactions of at most 128.
func TestCompareAndSwapAllStoresManyInFewTransactions(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	next := bumpEpochs(createPartitions(t, a, 300))
	before := txns.count()
	expectStored(t, a, next, a.CompareAndSwapAll(context.Background(), next))
	if n := txns.count() - before; n != 3 {
		t.Fatalf("%d transactions for 300 partitions, want 3", n)
	}
}

// A partition changed or deleted after it was read fails alone, answered
// with what is stored now, which the batch did not overwrite; the rest of
// its transaction is stored.
func TestCompareAndSwapAllFailsOnlyThePartitionChangedConcurrently(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	ctx := context.Background()
	states := createPartitions(t, a, 300)
	next := bumpEpochs(states)
	changed := states[17]
	changed.Catchup = []string{"d"}
	concurrent, err := a.CompareAndSwap(ctx, changed)
	if err != nil {
		t.Fatal(err)
	}
	gone := mustCreatePartition(t, a, PartitionState{Topic: "u", Partition: 0, Leader: "b", ISR: []string{"b"}, Replicas: 1})
	if err := a.Delete(ctx, "u"); err != nil {
		t.Fatal(err)
	}
	next = append(next, gone)
	before := txns.count()

	results := a.CompareAndSwapAll(ctx, next)
	expectStored(t, a, next, results, 17, 300)
	if err := results[17].Err; !errors.Is(err, ErrConflict) || !reflect.DeepEqual(results[17].Stored, concurrent) {
		t.Fatalf("the partition changed concurrently: %+v %v, want ErrConflict and %+v", results[17].Stored, err, concurrent)
	}
	if now, _, _ := a.Get(ctx, "t", 17); !reflect.DeepEqual(now, concurrent) {
		t.Fatalf("the concurrent change was overwritten: %+v", now)
	}
	if err := results[300].Err; !errors.Is(err, ErrConflict) || !errors.Is(err, ErrPartitionNotFound) {
		t.Fatalf("the partition deleted concurrently: %v, want ErrConflict and ErrPartitionNotFound", err)
	}
	// The first and the last transaction of 128 each hold one of them, and
	// are tried once more without it.
	if n := txns.count() - before; n != 5 {
		t.Fatalf("%d transactions, want 5", n)
	}
}

// A member that refuses a transaction for its size gets smaller ones.
func TestCompareAndSwapAllSplitsWhatEtcdRefuses(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 20)
	a := NewAssignments(cli, "")
	next := bumpEpochs(createPartitions(t, a, 300))
	expectStored(t, a, next, a.CompareAndSwapAll(context.Background(), next))
	txns.mu.Lock()
	defer txns.mu.Unlock()
	if len(txns.txns) < 300/20 {
		t.Fatalf("%d transactions stored 300 partitions 20 at most at a time", len(txns.txns))
	}
	for _, n := range txns.txns {
		if n > 20 {
			t.Fatalf("a transaction of %d partitions was counted though refused", n)
		}
	}
}

// States CompareAndSwap would refuse fail alone.
func TestCompareAndSwapAllRefusesInvalidStatesAlone(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	states := createPartitions(t, a, 4)
	next := bumpEpochs(states)
	next[1].Leader = "z" // not in the ISR
	next[2].Revision = 0
	next = append(next, next[3])
	results := a.CompareAndSwapAll(context.Background(), next)
	expectStored(t, a, next, results, 1, 2, 4)
	for _, i := range []int{1, 2, 4} {
		if results[i].Err == nil {
			t.Errorf("state %d (%+v) stored", i, next[i])
		}
	}
	for _, p := range []int32{1, 2} {
		if st, _, _ := a.Get(context.Background(), "t", p); !reflect.DeepEqual(st, states[p]) {
			t.Errorf("partition %d changed: %+v", p, st)
		}
	}
	if got := fmt.Sprint(results[4].Err); !strings.Contains(got, "twice") {
		t.Errorf("a partition given twice: %v", got)
	}
}
