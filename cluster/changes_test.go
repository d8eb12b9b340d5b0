package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(time.Millisecond)
	}
}

func shrinkAll(states []PartitionState, leader string, remove ...string) []LeaderChange {
	changes := make([]LeaderChange, len(states))
	for i, st := range states {
		changes[i] = ShrinkISRChange(st.Ref(), leader, remove)
	}
	return changes
}

// A follower node lost by 300 partitions leaves their ISRs in three
// transactions of at most 128, not 300 read-and-swap round trips.
func TestChangeAllShrinksManyInFewTransactions(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	states := createPartitions(t, a, 300)
	before := txns.count()
	for i, res := range a.ChangeAll(context.Background(), shrinkAll(states, "a", "c")) {
		if res.Err != nil {
			t.Fatalf("partition %d: %v", i, res.Err)
		}
		got, _, err := a.Get(context.Background(), "t", int32(i))
		if err != nil || !slices.Equal(got.ISR, []string{"a", "b"}) || !slices.Equal(got.Catchup, []string{"c"}) || got.Revision != res.Stored.Revision {
			t.Fatalf("partition %d: stored %+v, returned %+v (%v)", i, got, res.Stored, err)
		}
	}
	if n := txns.count() - before; n != 3 {
		t.Fatalf("%d transactions for 300 partitions, want 3", n)
	}
}

// Changes that start from the states the node knows (its watch's) are
// stored without a read first: 300 shrinks are three swaps, where 300
// joins from nothing are three reads and three swaps.
func TestChangesFromKnownStatesSkipTheRead(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	states := createPartitions(t, a, 300)
	known := map[PartitionRef]PartitionState{}
	for _, st := range states {
		known[st.Ref()] = st
	}
	before := txns.all()
	res := a.changeFrom(context.Background(), shrinkAll(states, "a", "c"), func(r PartitionRef) (PartitionState, bool) {
		st, ok := known[r]
		return st, ok
	})
	for i, r := range res {
		if r.Err != nil || !slices.Equal(r.Stored.ISR, []string{"a", "b"}) {
			t.Fatalf("partition %d: %+v", i, r)
		}
	}
	if n := txns.all() - before; n != 3 {
		t.Fatalf("%d transactions for 300 partitions from known states, want 3 swaps", n)
	}
	joins := make([]LeaderChange, len(states))
	for i, st := range states {
		joins[i] = JoinISRChange(st.Ref(), "a", "c")
	}
	before = txns.all()
	for i, r := range a.ChangeAll(context.Background(), joins) {
		if r.Err != nil {
			t.Fatalf("join of partition %d: %v", i, r.Err)
		}
	}
	if n := txns.all() - before; n != 6 {
		t.Fatalf("%d transactions for 300 partitions read first, want 3 reads and 3 swaps", n)
	}
}

// A known state older than the one stored decides nothing: one calling
// for no change is read before the change is answered (the replica it
// would drop came back meanwhile), and one changed since fails its
// compare and is changed again from what is stored.
func TestChangesFromStaleKnownStatesAreChecked(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	rejoined := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 2, Replicas: 3})
	changed := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 1, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3})
	staleRejoined := rejoined // as before c rejoined: c catching up
	staleRejoined.ISR, staleRejoined.Catchup, staleRejoined.EpochForWrite = []string{"a", "b"}, []string{"c"}, 1
	staleRejoined.Revision--
	staleChanged := changed
	if _, err := a.ShrinkISR(ctx, "m", 1, "a", []string{"b"}); err != nil {
		t.Fatal(err)
	}
	known := map[PartitionRef]PartitionState{rejoined.Ref(): staleRejoined, changed.Ref(): staleChanged}
	res := a.changeFrom(ctx, []LeaderChange{
		ShrinkISRChange(rejoined.Ref(), "a", []string{"c"}),
		ShrinkISRChange(changed.Ref(), "a", []string{"c"}),
	}, func(r PartitionRef) (PartitionState, bool) {
		st, ok := known[r]
		return st, ok
	})
	if got, _, _ := a.Get(ctx, "m", 0); res[0].Err != nil || !slices.Equal(got.ISR, []string{"a", "b"}) {
		t.Errorf("shrink from a stale state without c: %+v, stored %+v; want c dropped from the ISR stored", res[0], got)
	}
	if got, _, _ := a.Get(ctx, "m", 1); !errors.Is(res[1].Err, ErrISRTooSmall) || !slices.Equal(got.ISR, []string{"a", "c"}) {
		t.Errorf("shrink from a state changed since: %+v, stored %+v; want ErrISRTooSmall from the stored a, c", res[1], got)
	}
}

// Each change of a batch has the outcome it would have alone: refused for
// a leader that no longer leads, a missing partition or an ISR too small,
// nothing stored when there is nothing to change, stored otherwise.
func TestChangeAllAnswersEachChangeAsAlone(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	led := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3})
	other := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 1, Leader: "b", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3})
	small := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 2, Leader: "a", ISR: []string{"a", "b"}, Catchup: []string{"c"}, EpochForWrite: 1, Replicas: 3})
	caught := mustCreatePartition(t, a, PartitionState{Topic: "m", Partition: 3, Leader: "a", ISR: []string{"a", "b"}, Catchup: []string{"c"}, EpochForWrite: 4, Replicas: 3})
	missing := PartitionRef{Topic: "m", Partition: 9}

	res := a.ChangeAll(ctx, []LeaderChange{
		ShrinkISRChange(led.Ref(), "a", []string{"c"}),
		ShrinkISRChange(other.Ref(), "a", []string{"c"}),
		ShrinkISRChange(small.Ref(), "a", []string{"b"}),
		JoinISRChange(caught.Ref(), "a", "c"),
		DisableWritesChange(missing, "a"),
		ShrinkISRChange(led.Ref(), "a", []string{"b"}),
		ShrinkISRChange(caught.Ref(), "a", []string{"x"}),
	})
	if res[0].Err != nil || !slices.Equal(res[0].Stored.ISR, []string{"a", "b"}) {
		t.Errorf("shrink: %+v", res[0])
	}
	if !errors.Is(res[1].Err, ErrConflict) || res[1].Stored.Revision != other.Revision {
		t.Errorf("shrink by a node not leading: %+v, want ErrConflict with the state stored", res[1])
	}
	if !errors.Is(res[2].Err, ErrISRTooSmall) {
		t.Errorf("shrink below a majority: %v, want ErrISRTooSmall", res[2].Err)
	}
	if res[3].Err != nil || !slices.Equal(res[3].Stored.ISR, []string{"a", "b", "c"}) || res[3].Stored.EpochForWrite != 5 {
		t.Errorf("join: %+v", res[3])
	}
	if !errors.Is(res[4].Err, ErrPartitionNotFound) {
		t.Errorf("change of a missing partition: %v, want ErrPartitionNotFound", res[4].Err)
	}
	if res[5].Err == nil {
		t.Errorf("a partition given twice in one batch was changed twice: %+v", res[5])
	}
	if res[6].Err != nil || res[6].Stored.Revision != caught.Revision {
		t.Errorf("shrink of a node outside the ISR: %+v, want the state unchanged", res[6])
	}
	if got, _, _ := a.Get(ctx, "m", 1); got.Revision != other.Revision {
		t.Errorf("refused change stored: %+v", got)
	}
}

// A partition another writer changes between the batch's read and its
// swap is changed again from what is stored now; the rest of the batch is
// stored meanwhile.
func TestChangeAllRetriesAPartitionChangedConcurrently(t *testing.T) {
	_, cli0, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	states := createPartitions(t, a, 10)
	other := NewAssignments(cli0, "")
	var once sync.Once
	txns.beforeWrite = func(int) {
		once.Do(func() {
			if _, err := other.ShrinkISR(context.Background(), "t", 4, "a", []string{"b"}); err != nil {
				t.Error(err)
			}
		})
	}
	res := a.ChangeAll(context.Background(), shrinkAll(states, "a", "c"))
	for i, r := range res {
		want := []string{"a", "b"}
		if i == 4 {
			want = []string{"a"}
		}
		if i == 4 && !errors.Is(r.Err, ErrISRTooSmall) {
			t.Errorf("partition 4, shrunk to a, b by another writer: %v, want ErrISRTooSmall on the retry", r.Err)
			continue
		}
		if i != 4 && (r.Err != nil || !slices.Equal(r.Stored.ISR, want)) {
			t.Errorf("partition %d: %+v", i, r)
		}
	}
}

// Changes asked while a batch is in flight wait and go together in the
// next; a second change of one partition waits for a batch of its own, and
// both are stored.
func TestChangerBatchesWhatArrivesDuringABatch(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	var states []PartitionState
	for p := range int32(200) {
		states = append(states, mustCreatePartition(t, a, PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "c", "d", "e"}, EpochForWrite: 1, Replicas: 5}))
	}
	c := NewChanger(a)
	queued := func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	release := make(chan struct{})
	before := txns.count()
	txns.beforeWrite = func(n int) {
		if n == before {
			<-release
		}
	}
	ctx := context.Background()
	first := make(chan error, 1)
	go func() {
		_, err := c.Change(ctx, ShrinkISRChange(states[0].Ref(), "a", []string{"e"}))
		first <- err
	}()
	waitFor(t, func() bool { return txns.count() > before })
	// Every other partition loses e, and partition 1 loses d too.
	wave := shrinkAll(states[1:], "a", "e")
	wave = append(wave, ShrinkISRChange(states[1].Ref(), "a", []string{"d"}))
	errs := make(chan error, len(wave))
	for _, ch := range wave {
		go func() {
			_, err := c.Change(ctx, ch)
			errs <- err
		}()
	}
	waitFor(t, func() bool { return queued() == len(wave) })
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for range wave {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Partition 0 alone, then 199 partitions in two transactions, then
	// partition 1's second change alone.
	if n := txns.count() - before; n != 4 {
		t.Errorf("%d transactions, want 4", n)
	}
	for i := range states {
		got, _, err := a.Get(ctx, "t", int32(i))
		want := []string{"a", "b", "c", "d"}
		if i == 1 {
			want = []string{"a", "b", "c"}
		}
		if err != nil || !slices.Equal(got.ISR, want) {
			t.Fatalf("partition %d: ISR %v, want %v (%v)", i, got.ISR, want, err)
		}
	}
}

// A change whose caller gives up returns at once with the caller's error.
func TestChangerReturnsWhenTheCallerGivesUp(t *testing.T) {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	a := NewAssignments(cli, "")
	states := createPartitions(t, a, 1)
	release := make(chan struct{})
	defer close(release)
	txns.beforeWrite = func(int) { <-release }
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("caller gave up"))
	if _, err := NewChanger(a).Change(ctx, ShrinkISRChange(states[0].Ref(), "a", []string{"c"})); err == nil || !errors.Is(err, context.Cause(ctx)) {
		t.Fatalf("change after the caller gave up: %v", err)
	}
}
