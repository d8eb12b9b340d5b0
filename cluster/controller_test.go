package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Behaviour 13 (docs/replication.md#elect-most-data): when a partition's
// leader is gone, the controller makes the live ISR member with the largest
// last LogID the leader, moves the dead member to catch-up and increments
// EpochForWrite. A partition whose leader lives is left alone.
func TestBehaviour13ControllerElectsLiveISRMemberWithMostData(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	for _, st := range []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3},
		{Topic: "t", Partition: 1, Leader: "b", ISR: []string{"b", "a", "c"}, EpochForWrite: 2, Replicas: 3},
	} {
		if _, _, err := assign.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	runController(t, cli, assign, map[string]int64{"b": 5, "c": 9})

	var st PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ = assign.Get(ctx, "t", 0)
		return st.Leader != "a"
	}) {
		t.Fatal("no new leader for a partition whose leader is not registered")
	}
	if st.Leader != "c" || !slices.Equal(st.ISR, []string{"b", "c"}) || !slices.Equal(st.Catchup, []string{"a"}) || st.EpochForWrite != 5 {
		t.Fatalf("after failover: %+v, want leader c (most data), ISR [b c], catch-up [a], epoch 5", st)
	}
	if p1, _, _ := assign.Get(ctx, "t", 1); p1.Leader != "b" || p1.EpochForWrite != 2 {
		t.Fatalf("partition with a live leader changed: %+v", p1)
	}
}

// A leader that restarted resigns (ResignLeadership) and the controller
// elects the ISR member with the most data, which need not be the one that
// resigned.
func TestControllerElectsForAResignedLeader(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	if _, _, err := assign.Create(ctx, PartitionState{Topic: "r", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, LeaderSession: "b@3", Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := assign.ResignLeadership(ctx, "r", 0, "c"); err == nil {
		t.Fatal("a follower resigned the leadership")
	}
	if st, err := assign.ResignLeadership(ctx, "r", 0, "b"); err != nil || st.Leader != "" || st.LeaderSession != "" || len(st.ISR) != 2 {
		t.Fatalf("after resigning: %+v %v", st, err)
	}
	runController(t, cli, assign, map[string]int64{"b": 5, "c": 9})
	var st PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ = assign.Get(ctx, "r", 0)
		return st.Leader != ""
	}) {
		t.Fatal("no leader elected for a resigned partition")
	}
	if st.Leader != "c" || st.EpochForWrite != 4 || st.LeaderSession != "c@4" || len(st.ISR) != 2 {
		t.Fatalf("after the election: %+v, want c (most data), epoch 4, leadership c@4, ISR of 2", st)
	}
}

// runController registers live nodes b and c, whose last LogIDs are given,
// and runs b's controller until the test ends.
func runController(t *testing.T, cli *clientv3.Client, assign *Assignments, lastLogIDs map[string]int64) {
	t.Helper()
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	startController(t, cli, assign, lastLogIDs, 0, slog.DiscardHandler)
}

// startController runs node b's controller until the test ends.
func startController(t *testing.T, cli *clientv3.Client, assign *Assignments, lastLogIDs map[string]int64, resignedWait time.Duration, log slog.Handler) {
	t.Helper()
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(log), ResignedWait: resignedWait,
		LastLogIDs: func(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
			ids := make(map[PartitionRef]int64, len(parts))
			for _, p := range parts {
				ids[p] = lastLogIDs[n.ID]
			}
			return ids, nil
		},
	})
}

// runUntilStopped runs ctrl until stop is called or the test ends.
func runUntilStopped(t *testing.T, ctrl *Controller) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ctrl.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// A leader that resigned after a restart left a partition whose ISR
// members may not all be back: the controller elects only once every ISR
// member is live, so the one with the most data is among the candidates.
func TestControllerWaitsForTheWholeISRAfterAResign(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	resigned := resign(t, assign, "a", []string{"a", "b", "c"})
	if resigned.Leader != "" || !slices.Equal(resigned.ISR, []string{"b", "c"}) || !slices.Equal(resigned.Catchup, []string{"a"}) {
		t.Fatalf("after resigning: %+v, want no leader, ISR b c and a catching up", resigned)
	}
	mustRegister(t, cli, testNode("b"))
	waiting := noticeOf("waiting for its ISR")
	startController(t, cli, assign, map[string]int64{"b": 5, "c": 9}, time.Hour, waiting)
	select {
	case <-waiting.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the controller never considered the leaderless partition")
	}
	if st, _, _ := assign.Get(ctx, "r", 0); st.Leader != "" {
		t.Fatalf("elected with c, which has more data, not live: %+v", st)
	}
	mustRegister(t, cli, testNode("c"))
	var st PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ = assign.Get(ctx, "r", 0)
		return st.Leader != ""
	}) {
		t.Fatal("no leader elected once the whole ISR was live")
	}
	if st.Leader != "c" || !slices.Equal(st.ISR, []string{"b", "c"}) || st.EpochForWrite != 4 {
		t.Fatalf("after the election: %+v, want c (most data), ISR b c, epoch 4", st)
	}
}

// An ISR member that never comes back holds the election up only for
// ResignedWait; then the live members elect among themselves.
func TestControllerElectsAfterResignedWait(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	resign(t, assign, "a", []string{"a", "b", "c"})
	mustRegister(t, cli, testNode("b"))
	start := time.Now()
	startController(t, cli, assign, map[string]int64{"b": 5, "c": 9}, 500*time.Millisecond, slog.DiscardHandler)
	var st PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ = assign.Get(ctx, "r", 0)
		return st.Leader != ""
	}) {
		t.Fatal("no leader elected after ResignedWait")
	}
	if waited := time.Since(start); waited < 500*time.Millisecond {
		t.Fatalf("elected after %v, before ResignedWait", waited)
	}
	if st.Leader != "b" || !slices.Equal(st.ISR, []string{"b"}) || !slices.Contains(st.Catchup, "c") {
		t.Fatalf("after the election: %+v, want b leading alone and c catching up", st)
	}
}

// A leader that resigns stays in the ISR when leaving it would leave less
// than a majority, as a restarted follower does.
func TestResignKeepsTheISRAMajority(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	st := resign(t, assign, "a", []string{"a", "b"})
	if st.Leader != "" || !slices.Equal(st.ISR, []string{"a", "b"}) || len(st.Catchup) != 0 {
		t.Fatalf("after resigning: %+v, want no leader and ISR a b", st)
	}
	// A restarted follower may still leave a partition without a leader.
	if _, err := assign.LeaveISR(context.Background(), "r", 0, "b"); !errors.Is(err, ErrISRTooSmall) {
		t.Fatalf("leaving an ISR of two out of three: %v, want ErrISRTooSmall", err)
	}
	resign(t, assign, "a", []string{"a", "b", "c", "d", "e"}, 5)
	st, err := assign.LeaveISR(context.Background(), "r", 0, "b")
	if err != nil || !slices.Equal(st.ISR, []string{"c", "d", "e"}) || !slices.Equal(st.Catchup, []string{"a", "b"}) {
		t.Fatalf("leaving the ISR of a partition without a leader: %+v %v", st, err)
	}
}

// resign creates partition r/0 led by leader with the ISR given, three
// replicas unless told, at epoch 3, and has the leader resign.
func resign(t *testing.T, assign *Assignments, leader string, isr []string, replicas ...int32) PartitionState {
	t.Helper()
	ctx := context.Background()
	assign.Delete(ctx, "r")
	if _, _, err := assign.Create(ctx, PartitionState{Topic: "r", Partition: 0, Leader: leader, ISR: isr, EpochForWrite: 3, Replicas: append(replicas, 3)[0]}); err != nil {
		t.Fatal(err)
	}
	st, err := assign.ResignLeadership(ctx, "r", 0, leader)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// noticeHandler closes seen the first time a record's message contains
// text.
func noticeOf(text string) *noticeHandler {
	return &noticeHandler{text: text, seen: make(chan struct{})}
}

type noticeHandler struct {
	text string
	seen chan struct{}
	once sync.Once
}

func (h *noticeHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *noticeHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.text) {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}
func (h *noticeHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *noticeHandler) WithGroup(string) slog.Handler      { return h }

// A controller that stops hands the office over at once instead of holding
// it until its session's lease runs out: the next node is elected well
// within the TTL.
func TestStoppedControllerHandsOverAtOnce(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	const ttl = 10 * time.Second
	start := func(id string) (elected chan struct{}, stop func()) {
		h := noticeOf("elected controller")
		return h.seen, runUntilStopped(t, &Controller{Client: cli, Prefix: DefaultMetaPrefix, NodeID: id, Assignments: assign, TTL: ttl, Logger: slog.New(h)})
	}
	first, stopFirst := start("b")
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first controller was never elected")
	}
	second, _ := start("c")
	stopFirst()
	stopped := time.Now()
	select {
	case <-second:
		t.Logf("the second controller elected %v after the first stopped", time.Since(stopped))
	case <-time.After(ttl / 2):
		t.Fatalf("the second controller not elected %v after the first stopped (session TTL %v)", ttl/2, ttl)
	}
}

// batchFixture is a cluster where node a, never registered, led n
// partitions of topic t with ISR a b c; b holds more of the even ones and c
// of the odd ones. It counts the controller's questions to each node and
// its rounds of elections.
type batchFixture struct {
	assign *Assignments
	txns   *txnCounter

	mu     sync.Mutex
	asked  map[string]int // LastLogIDs calls, by node
	rounds []FailoverRound
	// beforeAnswer, if set, runs inside a node's first answer, while the
	// controller waits between reading the states and storing new ones.
	beforeAnswer func(node string)
}

func newBatchFixture(t *testing.T, n int) *batchFixture {
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	f := &batchFixture{assign: NewAssignments(cli, ""), txns: txns, asked: map[string]int{}}
	createPartitions(t, f.assign, n)
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	return f
}

func (f *batchFixture) lastLogIDs(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
	f.mu.Lock()
	f.asked[n.ID]++
	first, hook := f.asked[n.ID] == 1, f.beforeAnswer
	f.mu.Unlock()
	if first && hook != nil {
		hook(n.ID)
	}
	ids := make(map[PartitionRef]int64, len(parts))
	for _, p := range parts {
		ids[p] = 10
		if (p.Partition%2 == 0) == (n.ID == "b") {
			ids[p] = 20
		}
	}
	return ids, nil
}

func (f *batchFixture) run(t *testing.T) {
	runUntilStopped(t, &Controller{
		Client: f.assign.cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: f.assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LastLogIDs: f.lastLogIDs,
		Observe: func(r FailoverRound) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if r.Elected+r.Conflicts > 0 {
				f.rounds = append(f.rounds, r)
			}
		},
	})
}

// waitLed waits until no partition of t is led by a and the controller
// has reported electing every one, and returns them.
func (f *batchFixture) waitLed(t *testing.T) []PartitionState {
	t.Helper()
	var states []PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		states, _ = f.assign.List(context.Background(), "t")
		return !slices.ContainsFunc(states, func(st PartitionState) bool { return st.Leader == "a" })
	}) {
		t.Fatal("partitions still led by the lost node")
	}
	if !eventually(t, 10*time.Second, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		elected := 0
		for _, r := range f.rounds {
			elected += r.Elected
		}
		return elected == len(states)
	}) {
		t.Fatal("the controller did not report the elections")
	}
	return states
}

// The controller asks each live candidate once for all the partitions the
// lost node led, and stores their new leaders in a few transactions; each
// partition is led by the member with the most data of it.
func TestControllerElectsAllPartitionsOfALostNodeTogether(t *testing.T) {
	const n = 300
	f := newBatchFixture(t, n)
	before := f.txns.count()
	start := time.Now()
	f.run(t)
	states := f.waitLed(t)
	t.Logf("%d partitions led again %v after the controller started", n, time.Since(start))
	for _, st := range states {
		want := "c"
		if st.Partition%2 == 0 {
			want = "b"
		}
		if st.Leader != want || !slices.Equal(st.ISR, []string{"b", "c"}) || !slices.Equal(st.Catchup, []string{"a"}) || st.EpochForWrite != 2 || st.WriteDisabled {
			t.Fatalf("partition %d: %+v, want leader %s (most data), ISR [b c], catch-up [a], epoch 2", st.Partition, st, want)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !maps.Equal(f.asked, map[string]int{"b": 1, "c": 1}) {
		t.Fatalf("last LogIDs asked %v, want once of each live node", f.asked)
	}
	if txns := f.txns.count() - before; txns > (n+maxTxnPartitions-1)/maxTxnPartitions {
		t.Fatalf("%d transactions to store %d partitions", txns, n)
	}
	if len(f.rounds) != 1 || f.rounds[0] != (FailoverRound{Lost: n, Elected: n, Took: f.rounds[0].Took}) {
		t.Fatalf("rounds %+v, want one electing all %d", f.rounds, n)
	}
}

// A partition changed while the controller was electing fails its compare
// alone: the others are stored in the same round, and it is elected again
// from what is stored, keeping the concurrent change.
func TestControllerConcurrentChangeFailsOnlyThatPartition(t *testing.T) {
	const n = 300
	f := newBatchFixture(t, n)
	ctx := context.Background()
	var changed PartitionState
	f.beforeAnswer = func(node string) {
		if node != "b" {
			return
		}
		st, _, err := f.assign.Get(ctx, "t", 42)
		if err == nil {
			st.Catchup = []string{"d"}
			changed, err = f.assign.CompareAndSwap(ctx, st)
		}
		if err != nil {
			t.Error(err)
		}
	}
	f.run(t)
	states := f.waitLed(t)
	st := states[42]
	if st.Leader != "b" || !slices.Equal(st.Catchup, []string{"d", "a"}) || st.EpochForWrite != changed.EpochForWrite+1 {
		t.Fatalf("partition changed concurrently: %+v, want leader b and catch-up [d a] at epoch %d", st, changed.EpochForWrite+1)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.rounds) != 2 || f.rounds[0].Elected != n-1 || f.rounds[0].Conflicts != 1 || f.rounds[1].Lost != 1 || f.rounds[1].Elected != 1 {
		t.Fatalf("rounds %+v, want %d elected and 1 conflict, then that one elected", f.rounds, n-1)
	}
}

// A check right after a round of elections, before the watch has brought
// what the round stored, finds nothing to elect: the round's own results
// are in the view. Thousands of elections otherwise come back a second
// later as thousands of failed compares.
func TestControllerCheckRightAfterARoundElectsNothingAgain(t *testing.T) {
	const n = 300
	f := newBatchFixture(t, n)
	ctx := context.Background()
	c := &Controller{Client: f.assign.cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: f.assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LastLogIDs: f.lastLogIDs,
		Observe: func(r FailoverRound) { f.rounds = append(f.rounds, r) }}
	view := partitionView{}
	states, err := f.assign.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		view.apply(st)
	}
	live := []NodeInfo{testNode("b"), testNode("c")}
	c.failover(ctx, view, live, resignedSince{}, newLapses(0))
	before := f.txns.count()
	c.failover(ctx, view, live, resignedSince{}, newLapses(0))
	if len(f.rounds) != 1 || f.rounds[0].Elected != n {
		t.Fatalf("rounds %+v, want one electing all %d", f.rounds, n)
	}
	if txns := f.txns.count() - before; txns != 0 {
		t.Fatalf("the second check stored %d transactions", txns)
	}
}

// A check that elected leaders puts repairs and moves off for a check
// interval, a check the node list runs meanwhile too; they never wait
// past two intervals since they last ran.
func TestPlacementsWaitAnIntervalAfterElections(t *testing.T) {
	turn := placementTurn{every: time.Second}
	at := time.Unix(1000, 0)
	for i, step := range []struct {
		after   time.Duration // since the start
		elected int
		runs    bool
	}{
		{0, 0, true},
		{time.Second, 3336, false},                     // a mass failover: the elections go first
		{time.Second + 5*time.Millisecond, 0, false},   // the node list changed
		{2 * time.Second, 0, true},                     // an interval later
		{3 * time.Second, 5, false},                    // elections again
		{3900 * time.Millisecond, 7, false},            // and again
		{4*time.Second + 10*time.Millisecond, 2, true}, // two intervals since they ran
		{5 * time.Second, 0, false},                    // within the interval the last election set
		{6 * time.Second, 0, true},
	} {
		if got := turn.after(step.elected, at.Add(step.after)); got != step.runs {
			t.Fatalf("check %d at %v, %d elected: placements run %v, want %v", i, step.after, step.elected, got, step.runs)
		}
	}
}

// levelCounts counts log records by level and message.
type levelCounts struct {
	mu     sync.Mutex
	counts map[string]int // "INFO partition leader elected"
	attrs  map[string]string
}

func (h *levelCounts) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCounts) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[r.Level.String()+" "+r.Message]++
	r.Attrs(func(a slog.Attr) bool {
		h.attrs[r.Message+" "+a.Key] = a.Value.String()
		return true
	})
	return nil
}
func (h *levelCounts) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *levelCounts) WithGroup(string) slog.Handler      { return h }

// A round that elects up to maxElectedLogged leaders logs each at info
// level; a larger one logs each at debug level and, at info, one line with
// how many each new leader took.
func TestElectionsLoggedOneByOneOnlyInSmallRounds(t *testing.T) {
	for _, n := range []int{maxElectedLogged, 300} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := newBatchFixture(t, n)
			states, err := f.assign.List(context.Background(), "t")
			if err != nil {
				t.Fatal(err)
			}
			for i := range states {
				states[i].Leader = []string{"b", "c"}[i%2]
				states[i].EpochForWrite++
			}
			h := &levelCounts{counts: map[string]int{}, attrs: map[string]string{}}
			c := &Controller{Assignments: f.assign, Logger: slog.New(h)}
			if round := c.storeElected(context.Background(), states, partitionView{}); round.Elected != n {
				t.Fatalf("round %+v, want %d elected", round, n)
			}
			one, sum := "INFO", 0
			if n > maxElectedLogged {
				one, sum = "DEBUG", 1
			}
			if got := h.counts[one+" partition leader elected"]; got != n {
				t.Errorf("%d elections logged at %s, want %d (%v)", got, one, n, h.counts)
			}
			if got := h.counts["INFO partition leaders elected"]; got != sum {
				t.Errorf("%d summaries, want %d (%v)", got, sum, h.counts)
			}
			if want := fmt.Sprintf("map[b:%d c:%d]", n/2, n/2); sum == 1 && h.attrs["partition leaders elected by_leader"] != want {
				t.Errorf("summary by leader %q, want %q", h.attrs["partition leaders elected by_leader"], want)
			}
		})
	}
}
