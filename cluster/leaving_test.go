package cluster

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// A node marked leaving has every leadership another live ISR member can
// take moved off it, as leader moves of reason "leaving", and keeps its
// replicas; the leader balance gives it none back, not even of the
// partitions it is the preferred replica of. A partition it alone may
// lead stays with it.
func TestControllerMovesALeavingNodesLeadershipsOff(t *testing.T) {
	assign, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	for p := range int32(3) {
		mustCreatePartition(t, assign, PartitionState{Topic: "l", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "a"})
	}
	mustCreatePartition(t, assign, PartitionState{Topic: "l", Partition: 3, Leader: "a", ISR: []string{"a"}, Catchup: []string{"b"}, EpochForWrite: 1, Replicas: 2, Preferred: "a"})
	mustCreatePartition(t, assign, PartitionState{Topic: "m", Partition: 0, Leader: "b", ISR: []string{"b", "a", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "a"})
	// Its balance move shows a round of the balance has run.
	mustCreatePartition(t, assign, PartitionState{Topic: "n", Partition: 0, Leader: "b", ISR: []string{"b", "a", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "c"})
	a := mustRegister(t, cli, testNode("a"))
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	if err := a.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if nodes := liveNodes(t, cli, ""); len(nodes) != 3 || !nodes[0].Leaving || nodes[1].Leaving {
		t.Fatalf("live nodes %+v, want a registered and leaving, b not", nodes)
	}
	var moves leaderMoves
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), ObserveLeaderMoves: moves.observe,
		LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 10,
	})
	if !eventually(t, 10*time.Second, func() bool {
		return moves.of(MoveLeaving) == 3 && moves.of(MoveBalance) > 0
	}) {
		t.Fatalf("%d leaving moves and %d balance moves, want 3 and 1", moves.of(MoveLeaving), moves.of(MoveBalance))
	}
	// Moves are counted once stored.
	states, err := assign.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range states {
		switch {
		case st.Move.Active():
			t.Errorf("%s: a replica move %+v, want none: a leaving node keeps its replicas", st.Ref(), st.Move)
		case st.Topic == "l" && st.Partition < 3 && (st.Leader == "a" || st.EpochForWrite != 2 || !slices.Contains(st.ISR, "a")):
			t.Errorf("%s: %+v, want led by b or c in epoch 2 with a still in the ISR", st.Ref(), st)
		case st.Topic == "l" && st.Partition == 3 && st.Leader != "a":
			t.Errorf("%s: %+v, want a leading: no other member is in sync", st.Ref(), st)
		case st.Topic == "m" && st.Leader != "b":
			t.Errorf("%s: %+v, want b leading: the balance gives a leaving node nothing", st.Ref(), st)
		case st.Topic == "n" && st.Leader != "c":
			t.Errorf("%s: %+v, want c, its preferred replica, leading", st.Ref(), st)
		}
	}
	if n := moves.of(MoveBalance); n != 1 {
		t.Errorf("%d balance moves, want 1, n/0's: the other preferred replicas are the leaving node", n)
	}
}

// Leave fails once the registration's lease is gone, rather than putting
// back a key the cluster has already seen go.
func TestLeaveAfterTheLeaseIsGoneFails(t *testing.T) {
	_, cli, _ := newTestAssignments(t)
	r := mustRegister(t, cli, testNode("a"))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Leave(context.Background()); !errors.Is(err, ErrRegistrationGone) {
		t.Fatalf("Leave after Close: %v, want ErrRegistrationGone", err)
	}
	if nodes := liveNodes(t, cli, ""); len(nodes) != 0 {
		t.Fatalf("live nodes %+v after a Leave on a revoked lease, want none", nodes)
	}
}
