package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func describeReplicaMoves(states []PartitionState) []string {
	var out []string
	for _, st := range states {
		out = append(out, fmt.Sprintf("%d:%v→%v", st.Partition, st.Move.Remove, st.Move.Add))
	}
	return out
}

// A drained node's replicas move to the least loaded nodes that are not
// drained, within the budget; partitions moving already or without a live
// leader wait.
func TestPlanDrainMovesEveryReplicaOffTheNode(t *testing.T) {
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c"), testNode("d"), testNode("e")}
	st := func(p int32, leader string, isr ...string) PartitionState {
		return PartitionState{Topic: "t", Partition: p, Leader: leader, ISR: isr, Replicas: int32(len(isr)), Revision: 1}
	}
	moving := st(3, "a", "a", "b", "c")
	moving.Move = Move{Add: []string{"d"}, Remove: []string{"c"}}
	states := []PartitionState{
		st(0, "a", "a", "b", "c"), // leader's replica: handed off by the move
		st(1, "b", "b", "a", "d"),
		st(2, "b", "b", "c", "d"), // not on a
		moving,                    // moving already
		st(4, "x", "x", "a", "b"), // leader gone: failover first
		st(5, "c", "c", "a", "b"),
	}
	drain := map[string]bool{"a": true, "e": true}
	got := describeReplicaMoves(planDrain(states, live, drain, 2))
	// Load b 5, c 4, d 3 (e drained): d takes the first, then c and d tie
	// at 4 and c goes first by ID.
	if want := []string{"0:[a]→[d]", "1:[a]→[c]"}; !slices.Equal(got, want) {
		t.Fatalf("planned %v, want %v", got, want)
	}
	got = describeReplicaMoves(planDrain(states, live, drain, 10))
	if len(got) != 3 || got[2] != "5:[a]→[d]" {
		t.Fatalf("planned %v", got)
	}
	if planDrain(states, live, nil, 10) != nil {
		t.Fatal("planned moves without a drained node")
	}
}

// A node that joins holding nothing receives replicas, the most loaded
// node's first and its followers' before its leaderships, until no node
// holds more than the average rounded up plus one; moves under way count
// at their end.
func TestPlanBalanceFillsANewNode(t *testing.T) {
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c"), testNode("d")}
	var states []PartitionState
	for p := range int32(6) {
		isr := []string{"a", "b", "c"}
		states = append(states, PartitionState{Topic: "t", Partition: p, Leader: isr[p%3], ISR: isr, Replicas: 3, Revision: 1})
	}
	// 18 replicas on 4 nodes: at most ⌈4.5⌉+1 = 6 and at least ⌊4.5⌋-1 = 3
	// each, so a, b and c give d one each; within the budget of 2, a and b
	// first.
	got := planBalance(states, live, nil, 2)
	if d := describeReplicaMoves(got); !slices.Equal(d, []string{"1:[a]→[d]", "0:[b]→[d]"}) {
		t.Fatalf("planned %v", d)
	}
	for _, st := range got {
		if st.Leader == st.Move.Remove[0] {
			t.Fatalf("moved a leader's replica while followers' could: %+v", st)
		}
	}
	states[0], states[1] = got[1], got[0]
	rest := planBalance(states, live, nil, 10)
	if d := describeReplicaMoves(rest); len(d) != 1 || d[0] != "3:[c]→[d]" {
		t.Fatalf("then planned %v", d)
	}
	states[rest[0].Partition] = rest[0]
	if more := planBalance(states, live, nil, 10); len(more) != 0 {
		t.Fatalf("balanced, yet planned %v", describeReplicaMoves(more))
	}
	if planBalance(states, live[:1], nil, 10) != nil {
		t.Fatal("balanced a single node")
	}
}

// A node holding more than the average rounded up plus one gives replicas
// to the least loaded nodes until it does not; drained nodes receive none.
func TestPlanBalanceUnloadsAnOverloadedNode(t *testing.T) {
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c"), testNode("d")}
	var states []PartitionState
	for p := range int32(6) {
		states = append(states, PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a"}, Replicas: 1, Revision: 1})
	}
	// 6 replicas on b, c and a (d drained): at most ⌈2⌉+1 = 3 on a.
	got := describeReplicaMoves(planBalance(states, live, map[string]bool{"d": true}, 10))
	if want := []string{"0:[a]→[b]", "1:[a]→[c]", "2:[a]→[b]"}; !slices.Equal(got, want) {
		t.Fatalf("planned %v, want %v", got, want)
	}
}

// No target choice puts a replica on a node being drained, though it holds
// nothing: not a repair, a drain, the balance nor a replica count.
func TestNoTargetIsADrainedNode(t *testing.T) {
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c"), testNode("d"), testNode("e")}
	draining := map[string]bool{"d": true, "e": true}
	var states []PartitionState
	for p := range int32(6) {
		states = append(states, PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "x"}, Replicas: 3, Revision: 1})
	}
	states = append(states,
		PartitionState{Topic: "u", Partition: 0, Leader: "e", ISR: []string{"e"}, Replicas: 1, Revision: 1},
		PartitionState{Topic: "v", Partition: 0, Leader: "c", ISR: []string{"c"}, Replicas: 1, Revision: 1})
	var targets []string
	for _, p := range planRepairs(states, live, draining, map[string]bool{"x": true}) {
		for _, m := range p.Moves {
			targets = append(targets, m.To)
		}
	}
	if len(targets) != 6 {
		t.Fatalf("repaired %d replicas of x, want 6", len(targets))
	}
	moves := planDrain(states, live, draining, 10)
	moves = append(moves, planBalance(states, live, draining, 10)...)
	count, err := replicaCountMoves(states, "u", 3, placeable(live, draining))
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range append(moves, count...) {
		targets = append(targets, st.Move.Add...)
	}
	if slices.Contains(targets, "d") || slices.Contains(targets, "e") {
		t.Fatalf("targets %v include a drained node", targets)
	}
	if repaired := planRepairs(states, live, nil, map[string]bool{"x": true}); repaired[0].Moves[0].To != "d" {
		t.Fatalf("without the drain, repair chose %v, want d, which holds the fewest", repaired[0].Moves)
	}
}

func TestDrainBlockedWhenNoNodeCouldTakeAReplica(t *testing.T) {
	nodes := func(ids ...string) []NodeInfo {
		var out []NodeInfo
		for _, id := range ids {
			out = append(out, NodeInfo{ID: id})
		}
		return out
	}
	three := PartitionState{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3}
	two := PartitionState{Topic: "t", Partition: 1, Leader: "a", ISR: []string{"a", "b"}, Replicas: 2}
	leaving := PartitionState{Topic: "t", Partition: 2, Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3,
		Move: Move{Add: []string{"d"}, Remove: []string{"c"}}}
	for _, c := range []struct {
		name     string
		states   []PartitionState
		live     []NodeInfo
		draining map[string]bool
		node     string
		want     []PartitionRef
	}{
		{"three replicas on three nodes", []PartitionState{three, two}, nodes("a", "b", "c"), nil, "c", []PartitionRef{{"t", 0}}},
		{"a fourth node takes it", []PartitionState{three}, nodes("a", "b", "c", "d"), nil, "c", nil},
		{"the fourth node is drained already", []PartitionState{three}, nodes("a", "b", "c", "d"), map[string]bool{"d": true}, "c", []PartitionRef{{"t", 0}}},
		{"two replicas: the third node takes one", []PartitionState{two}, nodes("a", "b", "c"), nil, "b", nil},
		{"a partition the node does not hold", []PartitionState{two}, nodes("a", "b"), nil, "c", nil},
		{"a replica already moving off the node", []PartitionState{leaving}, nodes("a", "b", "c", "d"), nil, "c", nil},
		{"a node that is down can be drained while others take its replicas", []PartitionState{three}, nodes("a", "b", "d"), nil, "c", nil},
	} {
		got := DrainBlocked(c.states, c.live, c.draining, c.node)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: blocked %v, want %v", c.name, got, c.want)
		}
	}
}
