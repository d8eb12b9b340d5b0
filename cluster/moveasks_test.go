package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// pendingAsks counts the leader move requests stored in etcd.
func pendingAsks(t *testing.T, cli *clientv3.Client, a *Assignments) int64 {
	t.Helper()
	resp, err := cli.Get(context.Background(), a.asksPrefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// An operator's leader move goes through etcd to the controller, which
// hands the leadership to the named ISR member with EpochForWrite
// incremented and deletes the request; without a target the preferred
// replica leads. What the controller would refuse is refused before
// anything is stored, and a request overtaken by another change is
// deleted without a move.
func TestControllerCarriesOutAskedLeaderMoves(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, Catchup: []string{"d"}, EpochForWrite: 4, Replicas: 3, Preferred: "b"})
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 1, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 2, Replicas: 2, Preferred: "c"})
	runController(t, cli, assign, nil)

	st, err := assign.MoveLeader(ctx, PartitionRef{"m", 0}, "b", "c")
	if err != nil || st.Leader != "c" || st.EpochForWrite != 5 || len(st.ISR) != 2 {
		t.Fatalf("moving m/0 to c: %+v %v, want c leading in epoch 5 with the same ISR", st, err)
	}
	if st, err := assign.MoveLeader(ctx, PartitionRef{"m", 1}, "", ""); err != nil || st.Leader != "c" || st.EpochForWrite != 3 {
		t.Fatalf("moving m/1 anywhere: %+v %v, want its preferred replica c in epoch 3", st, err)
	}
	if n := pendingAsks(t, cli, assign); n != 0 {
		t.Fatalf("%d requests left after they were carried out", n)
	}
	for _, c := range []struct {
		from, to string
		want     error
	}{
		{"b", "", ErrFromNotLeader},
		{"", "d", ErrTargetNotInISR},
		{"", "c", ErrAlreadyLeader},
		{"", "x", ErrTargetNotInISR},
	} {
		if _, err := assign.MoveLeader(ctx, PartitionRef{"m", 0}, c.from, c.to); !errors.Is(err, c.want) {
			t.Errorf("move from %q to %q: %v, want %v", c.from, c.to, err, c.want)
		}
	}
	if _, err := assign.MoveLeader(ctx, PartitionRef{"m", 7}, "", "c"); !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("moving a partition that does not exist: %v", err)
	}
	if n := pendingAsks(t, cli, assign); n != 0 {
		t.Fatalf("%d requests stored for moves refused at once", n)
	}

	// Asked when b led, seen after c took over: stale.
	stale, err := assign.AskLeaderMove(ctx, LeaderMoveAsk{Ref: PartitionRef{"m", 0}, From: "b", To: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := assign.AwaitLeaderMove(ctx, stale); !errors.Is(err, ErrLeaderMoved) || st.Leader != "c" {
		t.Fatalf("a stale request: %+v %v, want it reported overtaken with c still leading", st, err)
	}
	if st, _, _ := assign.Get(ctx, "m", 0); st.Leader != "c" || st.EpochForWrite != 5 {
		t.Fatalf("a stale request changed the partition: %+v", st)
	}
}

// With no controller to decide it, a request is withdrawn when its asker
// gives up, so it cannot move a leadership long after the asker answered.
func TestUndecidedLeaderMoveIsWithdrawn(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 1, Replicas: 2})
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := assign.MoveLeader(ctx, PartitionRef{"m", 0}, "", "c"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a move no controller decided: %v, want the deadline", err)
	}
	if n := pendingAsks(t, cli, assign); n != 0 {
		t.Fatalf("%d requests left behind by an asker that gave up", n)
	}
}

// leaderMoves counts what a controller reports through ObserveLeaderMoves.
type leaderMoves struct {
	mu  sync.Mutex
	got map[string]int
}

func (m *leaderMoves) observe(reason string, n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.got == nil {
		m.got = map[string]int{}
	}
	m.got[reason] += n
}

func (m *leaderMoves) of(reason string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.got[reason]
}

// The controller's leader balance gives leadership back to each preferred
// replica that is live and in the ISR, and leaves the others.
func TestControllerBalancesLeadersToPreferredReplicas(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	for _, st := range []PartitionState{
		{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, Replicas: 2, Preferred: "c"},
		{Topic: "m", Partition: 1, Leader: "c", ISR: []string{"c", "b"}, EpochForWrite: 3, Replicas: 2, Preferred: "b"},
		{Topic: "m", Partition: 2, Leader: "b", ISR: []string{"b", "a"}, EpochForWrite: 3, Replicas: 2, Preferred: "a"},
	} {
		mustCreatePartition(t, assign, st)
	}
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	var moves leaderMoves
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 1,
		ObserveLeaderMoves: moves.observe,
	})
	if !eventually(t, 10*time.Second, func() bool { return moves.of(MoveBalance) == 2 }) {
		t.Fatalf("%d leaderships moved back to their preferred replicas, want 2", moves.of(MoveBalance))
	}
	states, err := assign.List(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	// Partition 2's preferred replica a is not live: b keeps it.
	for i, want := range []struct {
		leader string
		epoch  int64
	}{{"c", 4}, {"b", 4}, {"b", 3}} {
		if st := states[i]; st.Leader != want.leader || st.EpochForWrite != want.epoch {
			t.Errorf("partition %d: %+v, want %s leading in epoch %d", i, st, want.leader, want.epoch)
		}
	}
}

// Draining a node's leaderships moves every one it holds to another live
// ISR member in one call, and names the partitions no other member can
// lead yet.
func TestControllerMovesLeadersOffANode(t *testing.T) {
	assign, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	for p := range int32(6) {
		mustCreatePartition(t, assign, PartitionState{Topic: "d", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "a"})
	}
	mustCreatePartition(t, assign, PartitionState{Topic: "d", Partition: 6, Leader: "a", ISR: []string{"a"}, Catchup: []string{"b"}, EpochForWrite: 1, Replicas: 2})
	mustCreatePartition(t, assign, PartitionState{Topic: "e", Partition: 0, Leader: "b", ISR: []string{"b", "a"}, EpochForWrite: 1, Replicas: 2})
	states, err := assign.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	view := partitionView{}
	for _, st := range states {
		view.apply(st)
	}
	var moves leaderMoves
	c := &Controller{Client: cli, Assignments: assign, Logger: slog.New(slog.DiscardHandler), ObserveLeaderMoves: moves.observe}
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c")}
	moved, stuck := c.moveLeadersOff(ctx, view, live, map[string]bool{"a": true})
	if moved != 6 || len(stuck) != 1 || stuck[0] != (PartitionRef{"d", 6}) || moves.of(MoveDrain) != 6 {
		t.Fatalf("moved %d (observed %d), stuck %v; want 6 moved and d/6 stuck", moved, moves.of(MoveDrain), stuck)
	}
	if states, err = assign.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	leads := leaderships(states)
	if leads["a"] != 1 || leads["b"] != 4 || leads["c"] != 3 {
		t.Fatalf("leaderships after the drain %v, want a 1 (d/6), b 4, c 3", leads)
	}
	for _, st := range states {
		if view[st.Ref()].Revision != st.Revision {
			t.Fatalf("the controller's view of %s is not what it stored", st.Ref())
		}
	}
}

// A request may arrive before the controller's watch brought the change
// its asker saw, such as the target joining the ISR: the controller
// decides on the partition's state as stored, not on its view.
func TestControllerDecidesAsksOnTheStoredState(t *testing.T) {
	assign, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	stale := mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, Catchup: []string{"d"}, EpochForWrite: 1, Replicas: 3})
	view := partitionView{}
	view.apply(stale)
	if _, err := assign.JoinISR(ctx, "m", 0, "b", "d"); err != nil {
		t.Fatal(err)
	}
	ask, err := assign.AskLeaderMove(ctx, LeaderMoveAsk{Ref: PartitionRef{"m", 0}, From: "b", To: "d"})
	if err != nil {
		t.Fatal(err)
	}
	c := &Controller{Client: cli, Assignments: assign, Logger: slog.New(slog.DiscardHandler)}
	q := newAskQueue()
	q.seen([]LeaderMoveAsk{ask})
	c.carryOutAsks(ctx, view, []NodeInfo{testNode("b"), testNode("c"), testNode("d")}, q)
	if st, err := assign.AwaitLeaderMove(ctx, ask); err != nil || st.Leader != "d" || st.EpochForWrite != 3 {
		t.Fatalf("after the request: %+v %v, want d leading in epoch 3 (the join made 2)", st, err)
	}
	if len(q.pending) != 0 || pendingAsks(t, cli, assign) != 0 {
		t.Fatalf("request still pending: %v", q.pending)
	}
}

// A drain moves the drained node's leaderships off it as leader moves, at
// once, while the moves of its replicas wait for their targets; a
// partition with no other member to lead hands over, by the same rule,
// once its target is in sync, and only then loses the drained replica.
func TestControllerDrainMovesLeadershipsFirst(t *testing.T) {
	assign, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	for p := range int32(4) {
		mustCreatePartition(t, assign, PartitionState{Topic: "d", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "a"})
	}
	mustCreatePartition(t, assign, PartitionState{Topic: "e", Partition: 0, Leader: "a", ISR: []string{"a"}, EpochForWrite: 1, Replicas: 1, Preferred: "a"})
	for _, id := range []string{"a", "b", "c", "d"} {
		mustRegister(t, cli, testNode(id))
	}
	if err := assign.Drain(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	var moves leaderMoves
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), MaxMoves: 10, ObserveLeaderMoves: moves.observe,
	})
	var states []PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		states, _ = assign.List(ctx, "")
		return len(states) == 5 && !slices.ContainsFunc(states, func(st PartitionState) bool { return !st.Move.Active() })
	}) {
		t.Fatalf("drain moves not started: %+v", states)
	}
	for _, st := range states[:4] {
		if st.Leader == "a" || st.EpochForWrite != 2 || !slices.Equal(st.Move.Remove, []string{"a"}) || !slices.Contains(st.ISR, "a") {
			t.Fatalf("%s: %+v, want its leadership off a in epoch 2 while a's replica is still moving", st.Ref(), st)
		}
	}
	single := states[4]
	if single.Leader != "a" || moves.of(MoveDrain) != 4 {
		t.Fatalf("e/0 %+v with %d drain leader moves, want a leading until its target joins, and 4", single, moves.of(MoveDrain))
	}
	to := single.Move.Add[0]
	if !eventually(t, 10*time.Second, func() bool {
		single, _, _ = assign.Get(ctx, "e", 0)
		return slices.Contains(single.Catchup, to)
	}) {
		t.Fatalf("%s not catching up e/0: %+v", to, single)
	}
	if _, err := assign.JoinISR(ctx, "e", 0, "a", to); err != nil {
		t.Fatal(err)
	}
	if !eventually(t, 10*time.Second, func() bool {
		single, _, _ = assign.Get(ctx, "e", 0)
		return !single.Move.Active()
	}) {
		t.Fatalf("e/0 still moving: %+v", single)
	}
	if single.Leader != to || !slices.Equal(single.ISR, []string{to}) || moves.of(MoveDrain) != 5 {
		t.Fatalf("e/0 %+v after %d drain leader moves, want %s alone leading, and 5", single, moves.of(MoveDrain), to)
	}
}
