package cluster

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"
)

func TestDepartedShrinksMoveGoneFollowersToCatchingUp(t *testing.T) {
	live := map[string]bool{"b": true, "c": true}
	states := []PartitionState{
		// Led by a live node, followed by a gone one: shrunk.
		{Topic: "t", Partition: 0, Leader: "b", ISR: []string{"b", "a", "c"}, EpochForWrite: 3, Replicas: 3, Revision: 7},
		// Led by the gone node: the failover's, not this rule's.
		{Topic: "t", Partition: 1, Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3},
		// Every member live: nothing to do.
		{Topic: "t", Partition: 2, Leader: "c", ISR: []string{"c", "b"}, Replicas: 3},
		// Two of three gone: no majority would stay in sync, so the leader
		// keeps it and stops taking writes.
		{Topic: "t", Partition: 3, Leader: "b", ISR: []string{"b", "a", "d"}, Replicas: 3},
		// Without a leader: elections decide.
		{Topic: "t", Partition: 4, ISR: []string{"a", "b"}, Replicas: 2},
		// Already catching up: the gone node stays there once.
		{Topic: "t", Partition: 5, Leader: "c", ISR: []string{"c", "b", "a"}, Catchup: []string{"a"}, Replicas: 3},
	}
	got := departedShrinks(states, live)
	if len(got) != 2 {
		t.Fatalf("shrinks %+v, want partitions 0 and 5", got)
	}
	p0 := got[0]
	if p0.Partition != 0 || p0.Leader != "b" || !slices.Equal(p0.ISR, []string{"b", "c"}) ||
		!slices.Equal(p0.Catchup, []string{"a"}) || p0.EpochForWrite != 3 || p0.Revision != 7 {
		t.Fatalf("partition 0 after the shrink: %+v, want leader b, ISR [b c], catch-up [a], epoch and revision kept", p0)
	}
	if p5 := got[1]; p5.Partition != 5 || !slices.Equal(p5.ISR, []string{"c", "b"}) || !slices.Equal(p5.Catchup, []string{"a"}) {
		t.Fatalf("partition 5 after the shrink: %+v", p5)
	}
	if !slices.Equal(states[0].ISR, []string{"b", "a", "c"}) {
		t.Fatalf("the states given were changed: %+v", states[0])
	}
}

// A node that is not registered leaves the ISR of every partition whose
// leader lives, in the controller's few transactions, before any leader
// asks for it.
func TestControllerShrinksADepartedNodeOutOfEveryISR(t *testing.T) {
	const n = 300
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	assign := NewAssignments(cli, "")
	for p := range int32(n) {
		leader := []string{"b", "c"}[p%2]
		mustCreatePartition(t, assign, PartitionState{Topic: "t", Partition: p, Leader: leader,
			ISR: []string{leader, "a", []string{"c", "b"}[p%2]}, EpochForWrite: 1, Replicas: 3})
	}
	mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("c"))
	before := txns.count()
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	var states []PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		states, _ = assign.List(context.Background(), "t")
		return !slices.ContainsFunc(states, func(st PartitionState) bool { return slices.Contains(st.ISR, "a") })
	}) {
		t.Fatal("the departed node is still in some ISR")
	}
	for _, st := range states {
		if len(st.ISR) != 2 || !slices.Equal(st.Catchup, []string{"a"}) || st.EpochForWrite != 1 || st.Leader != []string{"b", "c"}[st.Partition%2] {
			t.Fatalf("partition %d: %+v, want its leader kept, ISR of the two live nodes, a catching up, epoch 1", st.Partition, st)
		}
	}
	// A read of every state and one swap per maxTxnPartitions, with room
	// for the controller's election and its own reads.
	if got, most := txns.count()-before, 2*((n+maxTxnPartitions-1)/maxTxnPartitions)+4; got > most {
		t.Fatalf("%d transactions to shrink %d partitions, want at most %d", got, n, most)
	}
}
