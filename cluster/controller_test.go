package cluster

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Behaviour 13 (reference §8): when a partition's leader is gone, the
// controller makes the live ISR member with the largest last LogID the
// leader, moves the dead member to catch-up and increments EpochForWrite.
// A partition whose leader lives is left alone.
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
	if _, _, err := assign.Create(ctx, PartitionState{Topic: "r", Partition: 0, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := assign.ResignLeadership(ctx, "r", 0, "c"); err == nil {
		t.Fatal("a follower resigned the leadership")
	}
	if st, err := assign.ResignLeadership(ctx, "r", 0, "b"); err != nil || st.Leader != "" || len(st.ISR) != 2 {
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
	if st.Leader != "c" || st.EpochForWrite != 4 || len(st.ISR) != 2 {
		t.Fatalf("after the election: %+v, want c (most data), epoch 4, ISR of 2", st)
	}
}

// runController registers live nodes b and c, whose last LogIDs are given,
// and runs b's controller until the test ends.
func runController(t *testing.T, cli *clientv3.Client, assign *Assignments, lastLogIDs map[string]int64) {
	t.Helper()
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	ctrl := &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler),
		LastLogID: func(_ context.Context, n NodeInfo, _ string, _ int32) (int64, error) {
			return lastLogIDs[n.ID], nil
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ctrl.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}
