package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func TestPlanRepairs(t *testing.T) {
	live := []NodeInfo{testNode("b"), testNode("c"), testNode("d"), testNode("e")}
	st := func(p int32, leader string, isr, catchup []string) PartitionState {
		return PartitionState{Topic: "t", Partition: p, Leader: leader, ISR: isr, Catchup: catchup, Replicas: int32(len(isr) + len(catchup)), Revision: 5}
	}
	states := []PartitionState{
		st(0, "b", []string{"a", "b", "c"}, nil),           // a to d or e
		st(1, "b", []string{"b", "c"}, []string{"a"}),      // a catching up moves too
		st(2, "a", []string{"a", "b", "c"}, nil),           // failover first
		st(3, "b", []string{"b", "c", "d"}, []string{"x"}), // x not expired
		st(4, "", []string{"a", "b"}, nil),                 // resigned: failover first
		st(5, "b", []string{"b", "a"}, []string{"f"}),      // two gone, one place left
	}
	plans := planRepairs(states, live, nil, map[string]bool{"a": true, "f": true})
	var got []string
	for _, p := range plans {
		if err := validPartitionState(p.Next); err != nil {
			t.Fatalf("planned an invalid state: %v", err)
		}
		got = append(got, fmt.Sprintf("%d:%v+%v %v", p.Next.Partition, p.Next.ISR, p.Next.Catchup, p.Moves))
	}
	// Load before: b 6, c 4, d 1, e 0 (a and f are not live). Each move
	// takes the least loaded node, the first by ID on a tie.
	want := []string{
		"0:[b c]+[e] [{a e}]",
		"1:[b c]+[d] [{a d}]",
		"5:[b]+[e d] [{a e} {f d}]",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plans\n%v\nwant\n%v", got, want)
	}
	if states[0].Catchup != nil || len(states[5].ISR) != 2 {
		t.Fatalf("the states read were changed: %+v", states)
	}
}

// A node lost for good held replicas of many partitions: they move to the
// least loaded live nodes, spread evenly, in few transactions.
func TestControllerRepairsManyReplicasTogether(t *testing.T) {
	const n = 200
	_, _, cfg := newTestAssignments(t)
	cli, txns := countTxns(t, cfg.ClientAddr, 0)
	assign := NewAssignments(cli, "")
	for p := range int32(n) {
		mustCreatePartition(t, assign, PartitionState{Topic: "t", Partition: p, Leader: "b", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3})
	}
	for _, id := range []string{"b", "c", "d", "e"} {
		mustRegister(t, cli, testNode(id))
	}
	before := txns.count()
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), RepairAfter: 100 * time.Millisecond,
	})
	var states []PartitionState
	if !eventually(t, 10*time.Second, func() bool {
		states, _ = assign.List(context.Background(), "t")
		return !slices.ContainsFunc(states, func(st PartitionState) bool {
			return slices.Contains(st.ISR, "a") || slices.Contains(st.Catchup, "a")
		})
	}) {
		t.Fatal("replicas still on the lost node")
	}
	to := map[string]int{}
	for _, st := range states {
		if st.Leader != "b" || !slices.Equal(st.ISR, []string{"b", "c"}) || len(st.Catchup) != 1 || st.EpochForWrite != 1 {
			t.Fatalf("partition %d: %+v, want ISR [b c], one replica catching up, epoch unchanged", st.Partition, st)
		}
		to[st.Catchup[0]]++
	}
	if !maps.Equal(to, map[string]int{"d": n / 2, "e": n / 2}) {
		t.Fatalf("replicas moved to %v, want half on d and half on e", to)
	}
	if got := txns.count() - before; got > (n+maxTxnPartitions-1)/maxTxnPartitions {
		t.Fatalf("%d transactions to repair %d partitions", got, n)
	}
}
