package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

func zoned(spec ...string) []NodeInfo {
	var out []NodeInfo
	for _, s := range spec {
		var id, zone string
		fmt.Sscanf(s, "%s %s", &id, &zone)
		out = append(out, NodeInfo{ID: id, Zone: zone})
	}
	return out
}

func ids(nodes []NodeInfo) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.ID)
	}
	return out
}

func zonesOf(nodes []NodeInfo, picked []string) map[string]int {
	out := map[string]int{}
	for _, id := range picked {
		out[nodes[slices.IndexFunc(nodes, func(n NodeInfo) bool { return n.ID == id })].Zone]++
	}
	return out
}

// Zones take turns in the order, so a round-robin over it meets every zone
// before any twice; without zones it is the nodes by ID.
func TestInterleaveZones(t *testing.T) {
	got := ids(InterleaveZones(zoned("f c", "a a", "e c", "b a", "d b", "c b")))
	if want := []string{"a", "c", "e", "b", "d", "f"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	got = ids(InterleaveZones(zoned("a x", "b x", "c x", "d y")))
	if want := []string{"a", "d", "b", "c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("uneven zones: order %v, want %v", got, want)
	}
	if got := ids(InterleaveZones([]NodeInfo{{ID: "c"}, {ID: "a"}, {ID: "b"}})); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Fatalf("no zones: order %v, want by ID", got)
	}
}

// Three zones of two nodes, three replicas: one replica in each zone, for
// every leader, and every node takes as many replicas as any other. Two
// zones: two and one. No zones: consecutive nodes, as placement always did.
func TestSpreadReplicas(t *testing.T) {
	nodes := zoned("n1 a", "n2 a", "n3 b", "n4 b", "n5 c", "n6 c")
	order := InterleaveZones(nodes)
	held := map[string]int{}
	for first := range order {
		picked := SpreadReplicas(order, first, 3)
		if picked[0] != order[first].ID {
			t.Fatalf("first %d: leader %s, want %s", first, picked[0], order[first].ID)
		}
		if z := zonesOf(nodes, picked); len(z) != 3 {
			t.Fatalf("first %d: replicas %v in zones %v, want one in each of three", first, picked, z)
		}
		for _, id := range picked {
			held[id]++
		}
	}
	for _, n := range nodes {
		if held[n.ID] != 3 {
			t.Fatalf("replicas per node %v, want 3 each", held)
		}
	}

	two := zoned("n1 a", "n2 a", "n3 b", "n4 b")
	for first := range 4 {
		picked := SpreadReplicas(InterleaveZones(two), first, 3)
		if z := zonesOf(two, picked); len(z) != 2 || z["a"]+z["b"] != 3 {
			t.Fatalf("two zones, first %d: replicas %v in zones %v, want 2+1", first, picked, z)
		}
	}

	plain := []NodeInfo{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}}
	if got := SpreadReplicas(plain, 3, 3); !reflect.DeepEqual(got, []string{"d", "a", "b"}) {
		t.Fatalf("no zones: %v, want the next nodes round the ring", got)
	}
	if got := SpreadReplicas(plain, 1, 9); len(got) != 4 {
		t.Fatalf("more replicas than nodes: %v", got)
	}
}

// Repair re-creates a lost replica in the zone the partition is missing,
// before a less loaded node of a zone it already has; without zones only
// the load counts (TestPlanRepairs).
func TestRepairKeepsZonesApart(t *testing.T) {
	live := zoned("b za", "c zb", "d zb", "e zc")
	states := []PartitionState{
		// a, gone, held the partition's replica in zone zc.
		{Topic: "t", Partition: 0, Leader: "b", ISR: []string{"a", "b", "c"}, Replicas: 3, Revision: 5},
		{Topic: "t", Partition: 1, Leader: "e", ISR: []string{"e", "b", "c"}, Replicas: 3, Revision: 5},
		{Topic: "t", Partition: 2, Leader: "e", ISR: []string{"e", "b", "c"}, Replicas: 3, Revision: 5},
	}
	plans := planRepairs(states, live, nil, map[string]bool{"a": true})
	if len(plans) != 1 || !reflect.DeepEqual(plans[0].Moves, []replicaMove{{Gone: "a", To: "e"}}) {
		t.Fatalf("plans %+v: want a's replica on e, the one node of zone zc, though d holds fewer", plans)
	}
	if got := spreadTarget(PartitionState{Leader: "b", ISR: []string{"b", "c"}}, "", live, map[string]int{"d": 0, "e": 5}); got != "e" {
		t.Fatalf("spreadTarget %s, want e in the zone the partition lacks", got)
	}
}

// Every target choice counts the replicas that stay: not the one leaving,
// nor those a move removes, but those a move adds, and only on candidates
// (a drained or gone node lends its zone none). Of the zones holding the
// fewest, the least loaded node, then the first by ID.
func TestSpreadTargetCountsTheReplicasThatStay(t *testing.T) {
	nodes := zoned("a1 a", "a2 a", "b1 b", "b2 b", "c1 c")
	load := map[string]int{"a1": 5, "a2": 4, "b1": 1, "b2": 0, "c1": 3}
	st := func(isr ...string) PartitionState { return PartitionState{Leader: isr[0], ISR: isr} }
	moving := st("a1", "b1")
	moving.Move = Move{Add: []string{"c1"}, Remove: []string{"b1"}}
	for _, c := range []struct {
		name       string
		st         PartitionState
		leaving    string
		candidates []NodeInfo
		want       string
	}{
		{"the zone missing, though more loaded", st("a1", "b1"), "", nodes, "c1"},
		{"the leaving replica's zone is free again", st("a1", "b1", "c1"), "a1", nodes, "a2"},
		{"zones tie: the least loaded", st("a1", "b1", "c1"), "", nodes, "b2"},
		{"a move's add counts, its removal does not", moving, "", nodes, "b2"},
		{"a drained node lends its zone none", st("a1", "c1"), "", zoned("a2 a", "b2 b", "c1 c"), "b2"},
		{"a drained c1 leaves zone c empty", st("a1", "b1", "c1"), "c1", zoned("a1 a", "a2 a", "b1 b", "b2 b"), "b2"},
		{"no zones: the least loaded", st("a1"), "", []NodeInfo{{ID: "a1"}, {ID: "b1"}, {ID: "x"}}, "x"},
		{"no node left", st("a1", "b1"), "", zoned("a1 a", "b1 b"), ""},
	} {
		if got := spreadTarget(c.st, c.leaving, c.candidates, load); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A replica moving between zones keeps the spread when the zone it enters
// holds no more of the partition than the zone it leaves did.
func TestKeepsSpread(t *testing.T) {
	zoneOf := map[string]string{"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c", "x": "", "y": ""}
	st := PartitionState{Leader: "a1", ISR: []string{"a1", "b1", "c1"}}
	crowded := PartitionState{Leader: "a1", ISR: []string{"a1", "a2", "b1"}}
	for _, c := range []struct {
		st       PartitionState
		from, to string
		want     bool
	}{
		{st, "a1", "a2", true},  // the same zone
		{st, "b1", "a2", false}, // a twice, b none
		{crowded, "a2", "c1", true},
		{crowded, "a2", "b2", true}, // 1+1 for 1+1
		{crowded, "b1", "a2", false},
		{PartitionState{Leader: "x", ISR: []string{"x"}}, "x", "y", true}, // no zones
	} {
		if got := keepsSpread(c.st, c.from, c.to, zoneOf); got != c.want {
			t.Errorf("%v: %s → %s keeps the spread %v, want %v", c.st.ISR, c.from, c.to, got, c.want)
		}
	}
}

// A drain moves each replica into the zone its partition lacks, rather
// than onto the least loaded node of a zone it already has.
func TestPlanDrainKeepsZonesApart(t *testing.T) {
	live := zoned("a1 a", "a2 a", "b1 b", "b2 b", "c1 c", "c2 c")
	states := []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a1", ISR: []string{"a1", "b1", "c1"}, Replicas: 3, Revision: 1},
		{Topic: "t", Partition: 1, Leader: "b2", ISR: []string{"b2", "c2", "a1"}, Replicas: 3, Revision: 1},
		{Topic: "t", Partition: 2, Leader: "b1", ISR: []string{"b1", "c1"}, Replicas: 2, Revision: 1},
		{Topic: "t", Partition: 3, Leader: "c2", ISR: []string{"c2", "b2"}, Replicas: 2, Revision: 1},
	}
	// c1 is drained. a2 holds nothing and is the least loaded, yet
	// partition 0 loses its zone-c replica, so c2 takes it; partition 2
	// keeps b, and takes the least loaded of zones a and c: a2.
	got := describeReplicaMoves(planDrain(states, live, map[string]bool{"c1": true}, 10))
	if want := []string{"0:[c1]→[c2]", "2:[c1]→[a2]"}; !slices.Equal(got, want) {
		t.Fatalf("planned %v, want %v", got, want)
	}
}

// The balance moves a replica within its zone, or into one the partition
// lacks; a move that would leave the partition in fewer zones is not made,
// though its target holds the fewest replicas.
func TestPlanBalanceKeepsZonesApart(t *testing.T) {
	// A fourth node joins zone a of three nodes, one per zone, holding six
	// partitions of three replicas: only a1's replicas may go to it.
	live := zoned("a1 a", "b1 b", "c1 c", "a2 a")
	var states []PartitionState
	for p := range int32(6) {
		isr := []string{"a1", "b1", "c1"}
		states = append(states, PartitionState{Topic: "t", Partition: p, Leader: isr[p%3], ISR: isr, Replicas: 3, Revision: 1})
	}
	got := planBalance(states, live, nil, 10)
	if d := describeReplicaMoves(got); !slices.Equal(d, []string{"1:[a1]→[a2]", "2:[a1]→[a2]", "4:[a1]→[a2]"}) {
		t.Fatalf("planned %v, want three of a1's replicas on a2", d)
	}
	for _, st := range got {
		states[st.Partition] = st
	}
	if more := planBalance(states, live, nil, 10); len(more) != 0 {
		t.Fatalf("balanced as far as zones allow, yet planned %v", describeReplicaMoves(more))
	}
	// Two nodes in zones a and b, a1 the most loaded: its replica goes to
	// a2, in its own zone, not to b2, which holds fewer.
	live = zoned("a1 a", "a2 a", "b1 b", "b2 b", "c1 c")
	states = []PartitionState{{Topic: "t", Partition: 5, Leader: "a2", ISR: []string{"a2"}, Replicas: 1, Revision: 1}}
	for p := range int32(5) {
		states = append(states, PartitionState{Topic: "t", Partition: p, Leader: "a1", ISR: []string{"a1", "b1", "c1"}, Replicas: 3, Revision: 1})
	}
	got = planBalance(states, live, nil, 1)
	if d := describeReplicaMoves(got); !slices.Equal(d, []string{"0:[a1]→[a2]"}) {
		t.Fatalf("planned %v", d)
	}
}

// A replica count raised adds replicas in the zones each partition lacks;
// lowered, it removes them from the zone holding the most, a replica on a
// node not live or drained first, never the leader.
func TestReplicaCountKeepsZonesApart(t *testing.T) {
	live := zoned("a1 a", "a2 a", "b1 b", "c1 c")
	states := []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a1", ISR: []string{"a1"}, Replicas: 1, Revision: 1},
		{Topic: "t", Partition: 1, Leader: "a2", ISR: []string{"a2"}, Replicas: 1, Revision: 1},
	}
	up, err := replicaCountMoves(states, "t", 3, live)
	if err != nil {
		t.Fatal(err)
	}
	// a2 holds the fewest, but zone a is taken: b1 and c1 each time.
	if d := describeReplicaMoves(up); !slices.Equal(d, []string{"0:[]→[b1 c1]", "1:[]→[b1 c1]"}) {
		t.Fatalf("up to three: %v", d)
	}
	states = []PartitionState{
		// Removing the last followers would leave zone a alone.
		{Topic: "t", Partition: 0, Leader: "a1", ISR: []string{"a1", "a2", "b1", "c1"}, Replicas: 4, Revision: 1},
		{Topic: "t", Partition: 1, Leader: "b1", ISR: []string{"b1", "a1", "c1", "a2"}, Replicas: 4, Revision: 1},
		// x is gone: it goes first.
		{Topic: "t", Partition: 2, Leader: "c1", ISR: []string{"c1", "x", "b1", "a1"}, Replicas: 4, Revision: 1},
	}
	down, err := replicaCountMoves(states, "t", 2, live)
	if err != nil {
		t.Fatal(err)
	}
	if d := describeReplicaMoves(down); !slices.Equal(d, []string{"0:[a2 c1]→[]", "1:[a2 c1]→[]", "2:[x a1]→[]"}) {
		t.Fatalf("down to two: %v", d)
	}
}
