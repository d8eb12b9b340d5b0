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
	plans := planRepairs(states, live, map[string]bool{"a": true})
	if len(plans) != 1 || !reflect.DeepEqual(plans[0].Moves, []replicaMove{{Gone: "a", To: "e"}}) {
		t.Fatalf("plans %+v: want a's replica on e, the one node of zone zc, though d holds fewer", plans)
	}
	if got := leastLoaded(live, map[string]int{"d": 0, "e": 5}, PartitionState{Leader: "b", ISR: []string{"b", "c"}}); got != "e" {
		t.Fatalf("leastLoaded %s, want e in the zone the partition lacks", got)
	}
}
