package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// Before a leader move is stored, the old leader is told which of its
// leaderships are about to move, in the epoch they are led in, while it
// still leads them; the move waits for its answer, but no longer than the
// hand-over wait: an old leader that never answers is moved all the same.
func TestControllerHasTheOldLeaderDrainBeforeAMove(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	for _, st := range []PartitionState{
		{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, Replicas: 2, Preferred: "c"},
		{Topic: "m", Partition: 1, Leader: "c", ISR: []string{"c", "b"}, EpochForWrite: 5, Replicas: 2, Preferred: "b"},
	} {
		mustCreatePartition(t, assign, st)
	}
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	var mu sync.Mutex
	asked := map[string][]PlannedMove{}
	var problems []string
	var drained, notDrained int
	var moves leaderMoves
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 2,
		ObserveLeaderMoves: moves.observe,
		HandOverWait:       200 * time.Millisecond,
		ObserveHandOvers: func(r HandOverRound) {
			mu.Lock()
			drained, notDrained = drained+r.Drained, notDrained+r.NotDrained
			mu.Unlock()
		},
		HandOver: func(ctx context.Context, n NodeInfo, planned []PlannedMove) (int, error) {
			mu.Lock()
			asked[n.ID] = append(asked[n.ID], planned...)
			mu.Unlock()
			for _, p := range planned {
				if st, _, err := assign.Get(ctx, p.Ref.Topic, p.Ref.Partition); err != nil || st.Leader != n.ID || st.EpochForWrite != p.Epoch {
					mu.Lock()
					problems = append(problems, fmt.Sprintf("%s asked to drain %+v while the partition is %+v (%v)", n.ID, p, st, err))
					mu.Unlock()
				}
			}
			if n.ID == "c" {
				<-ctx.Done() // never drains
				return 0, ctx.Err()
			}
			return len(planned), nil
		},
	})
	if !eventually(t, 10*time.Second, func() bool { return moves.of(MoveBalance) == 2 }) {
		t.Fatalf("%d leaderships moved back to their preferred replicas, want 2", moves.of(MoveBalance))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
	if drained != 1 || notDrained != 1 {
		t.Errorf("observed %d leaderships drained and %d not, want 1 and 1", drained, notDrained)
	}
	for node, want := range map[string]PlannedMove{"b": {PartitionRef{"m", 0}, 3}, "c": {PartitionRef{"m", 1}, 5}} {
		if !slices.Equal(asked[node], []PlannedMove{want}) {
			t.Errorf("%s was asked to drain %+v, want %+v once", node, asked[node], want)
		}
	}
	for p, want := range []string{"c", "b"} {
		if st, _, _ := assign.Get(context.Background(), "m", int32(p)); st.Leader != want {
			t.Errorf("m/%d led by %s after the balance, want %s", p, st.Leader, want)
		}
	}
}

// A replica move that removes the leader's replica has the leader drain
// before the hand-off is stored, as a leader move does.
func TestControllerHasTheLeaderDrainBeforeAReplicaMoveHandsItOff(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	mustCreatePartition(t, assign, PartitionState{Topic: "r", Partition: 0, Leader: "b", ISR: []string{"b", "c", "d"}, EpochForWrite: 7, Replicas: 3,
		Move: Move{Add: []string{"d"}, Remove: []string{"b"}}})
	for _, n := range []string{"b", "c", "d"} {
		mustRegister(t, cli, testNode(n))
	}
	asked := make(chan PlannedMove, 4)
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler),
		HandOver: func(ctx context.Context, n NodeInfo, planned []PlannedMove) (int, error) {
			for _, p := range planned {
				if st, _, err := assign.Get(ctx, p.Ref.Topic, p.Ref.Partition); err != nil || st.Leader != n.ID {
					t.Errorf("%s asked to drain %+v while the partition is %+v (%v)", n.ID, p, st, err)
				}
				asked <- p
			}
			return len(planned), nil
		},
	})
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ := assign.Get(context.Background(), "r", 0)
		return st.Leader != "b" && st.Leader != ""
	}) {
		t.Fatal("the leadership of the replica being removed was not handed off")
	}
	select {
	case p := <-asked:
		if want := (PlannedMove{PartitionRef{"r", 0}, 7}); p != want {
			t.Fatalf("asked to drain %+v, want %+v", p, want)
		}
	default:
		t.Fatal("the leader was handed off without being asked to drain")
	}
}

// A drained move the controller failed to store (the partition changed
// after the drain) is called off on its old leader, so its hold ends at
// once; the next round drains and moves it again.
func TestControllerCallsOffTheHoldOfAMoveItDidNotStore(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, Replicas: 2, Preferred: "c"})
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	var mu sync.Mutex
	drains, calledOff := 0, []PlannedMove(nil)
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 1,
		HandOver: func(ctx context.Context, n NodeInfo, planned []PlannedMove) (int, error) {
			mu.Lock()
			drains++
			first := drains == 1
			mu.Unlock()
			if first {
				// Written again: the controller's store of the move,
				// against the revision it read, conflicts.
				st, _, err := assign.Get(ctx, "m", 0)
				if err == nil {
					err = assign.CompareAndSwapAll(ctx, []PartitionState{st})[0].Err
				}
				if err != nil {
					t.Errorf("changing the partition under the move: %v", err)
				}
			}
			return len(planned), nil
		},
		MovesNotStored: func(_ context.Context, n NodeInfo, planned []PlannedMove) error {
			mu.Lock()
			defer mu.Unlock()
			if n.ID != "b" {
				t.Errorf("%s told of moves not stored, want b", n.ID)
			}
			calledOff = append(calledOff, planned...)
			return nil
		},
	})
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ := assign.Get(context.Background(), "m", 0)
		return st.Leader == "c"
	}) {
		t.Fatal("the leadership never moved back to its preferred replica")
	}
	if !eventually(t, 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calledOff) > 0
	}) {
		t.Fatal("the old leader was never told the move it drained for was not stored")
	}
	mu.Lock()
	defer mu.Unlock()
	if want := (PlannedMove{PartitionRef{"m", 0}, 3}); !slices.Equal(calledOff, []PlannedMove{want}) || drains != 2 {
		t.Errorf("called off %+v after %d drains, want %+v once after the first of 2", calledOff, drains, want)
	}
}

// A round of leader moves waiting for an old leader that does not drain
// gives way to a node's loss: the lost node's partitions are elected at
// once, not after the hand-over wait; the moves of the round are not
// stored, and their old leader is told so.
func TestPlannedMovesGiveWayToANodesLoss(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "c", ISR: []string{"c", "b"}, EpochForWrite: 3, Replicas: 2, Preferred: "b"})
	mustCreatePartition(t, assign, PartitionState{Topic: "x", Partition: 0, Leader: "d", ISR: []string{"d", "b"}, EpochForWrite: 5, Replicas: 2, Preferred: "d"})
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	d := mustRegister(t, cli, testNode("d"))
	const wait = time.Minute
	draining := make(chan struct{}, 1)
	ended := make(chan error, 1)
	calledOff := make(chan []PlannedMove, 1)
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 1,
		HandOverWait: wait,
		LastLogIDs: func(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
			ids := make(map[PartitionRef]int64, len(parts))
			for _, p := range parts {
				ids[p] = 1
			}
			return ids, nil
		},
		HandOver: func(ctx context.Context, n NodeInfo, planned []PlannedMove) (int, error) {
			select {
			case draining <- struct{}{}:
			default:
			}
			<-ctx.Done() // c never drains
			select {
			case ended <- ctx.Err():
			default:
			}
			return 0, ctx.Err()
		},
		MovesNotStored: func(_ context.Context, n NodeInfo, planned []PlannedMove) error {
			select {
			case calledOff <- planned:
			default:
			}
			return nil
		},
	})
	select {
	case <-draining:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader balance never asked c to drain")
	}
	lostAt := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ := assign.Get(context.Background(), "x", 0)
		return st.Leader == "b"
	}) {
		t.Fatalf("x/0 not elected on b within 10 s of d's loss: its election waited behind a hand-over wait of %v", wait)
	}
	t.Logf("x/0 elected %v after d's loss", time.Since(lostAt).Round(time.Millisecond))
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the drain the round waited for ended with %v, want it called off (context.Canceled)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the round never stopped waiting for c")
	}
	select {
	case planned := <-calledOff:
		if want := (PlannedMove{PartitionRef{"m", 0}, 3}); !slices.Equal(planned, []PlannedMove{want}) {
			t.Errorf("told c of %+v not stored, want %+v", planned, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("c was never told its move was not stored")
	}
	if st, _, _ := assign.Get(context.Background(), "m", 0); st.Leader != "c" || st.EpochForWrite != 3 {
		t.Errorf("m/0 is %+v after its round gave way, want still led by c in epoch 3", st)
	}
}

// The feed of live nodes marks a loss as soon as a list shows one, until
// the loop takes a list; a node joining marks nothing.
func TestNodeFeedMarksALossUntilTheLoopTakesIt(t *testing.T) {
	f := newNodeFeed()
	marked := func() bool {
		select {
		case <-f.losses():
			return true
		default:
			return false
		}
	}
	f.put([]NodeInfo{testNode("a"), testNode("b")})
	f.put([]NodeInfo{testNode("a"), testNode("b"), testNode("c")})
	if marked() {
		t.Fatal("a node joining marked a loss")
	}
	if ns, ok := f.take(); !ok || len(ns) != 3 {
		t.Fatalf("took %v, %v; want the newest list of 3", ns, ok)
	}
	f.put([]NodeInfo{testNode("a"), testNode("c")})
	f.put([]NodeInfo{testNode("a"), testNode("b"), testNode("c")})
	if !marked() {
		t.Fatal("b's loss not marked while the loop had not taken a list")
	}
	<-f.ready
	if ns, ok := f.take(); !ok || len(ns) != 3 {
		t.Fatalf("took %v, %v; want the newest list of 3", ns, ok)
	}
	if marked() {
		t.Fatal("a loss still marked after the loop took the list")
	}
	f.end()
	if _, ok := f.take(); ok {
		t.Fatal("a list taken after the watch ended")
	}
}

// A round that begins with a loss the loop has not taken yet gives way
// before it asks any old leader to hold its writes, and counts its
// leaderships as given way, not as drained or not.
func TestRoundAfterAnUntakenLossAsksNoLeaderToHold(t *testing.T) {
	f := newNodeFeed()
	f.put([]NodeInfo{testNode("b"), testNode("c"), testNode("d")})
	f.take()
	f.put([]NodeInfo{testNode("b"), testNode("c")})
	asked := 0
	var rounds []HandOverRound
	c := &Controller{Logger: slog.New(slog.DiscardHandler), feed: f,
		HandOver: func(context.Context, NodeInfo, []PlannedMove) (int, error) {
			asked++
			return 1, nil
		},
		ObserveHandOvers: func(r HandOverRound) { rounds = append(rounds, r) },
	}
	moves := []leaderMove{{Next: PartitionState{Topic: "m", Leader: "b", EpochForWrite: 4}, From: "c", Reason: MoveBalance}}
	if !c.handOvers(context.Background(), moves, nodesByID([]NodeInfo{testNode("b"), testNode("c")})) {
		t.Fatal("the round did not give way to d's loss")
	}
	if asked != 0 {
		t.Fatalf("%d old leaders asked to hold, want none", asked)
	}
	f.take()
	if c.handOvers(context.Background(), moves, nodesByID([]NodeInfo{testNode("b"), testNode("c")})) || asked != 1 {
		t.Fatalf("after the loop took the loss: asked %d, want the round to ask c once and not give way", asked)
	}
	if want := []HandOverRound{{GaveWay: 1}, {Drained: 1}}; !slices.Equal(rounds, want) {
		t.Errorf("rounds observed as %+v, want %+v", rounds, want)
	}
}
