package broker

import (
	"fmt"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/partitamq/partita/cluster"
)

func nodesOf(spec map[string]string) []cluster.NodeInfo {
	var out []cluster.NodeInfo
	for id, zone := range spec {
		out = append(out, cluster.NodeInfo{ID: id, Zone: zone})
	}
	slices.SortFunc(out, func(a, b cluster.NodeInfo) int { return cmpID(a.ID, b.ID) })
	return out
}

func cmpID(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Without zones a topic is placed as it always was: partition p led by the
// node at the topic's start plus p in ID order, followed by the next ones.
func TestPlaceWithoutZonesIsTheRound(t *testing.T) {
	nodes := nodesOf(map[string]string{"n1": "", "n2": "", "n3": "", "n4": ""})
	ids := []string{"n1", "n2", "n3", "n4"}
	states, err := place("orders", 6, 3, nodes)
	if err != nil {
		t.Fatal(err)
	}
	start := int(crc32.ChecksumIEEE([]byte("orders")) % 4)
	for p, st := range states {
		want := []string{ids[(start+p)%4], ids[(start+p+1)%4], ids[(start+p+2)%4]}
		if !slices.Equal(st.ISR, want) || st.Leader != want[0] || st.Partition != int32(p) || st.EpochForWrite != 1 || st.LeaderSession != want[0]+"@1" || st.Replicas != 3 {
			t.Fatalf("partition %d: %+v, want ISR %v", p, st, want)
		}
	}
	if _, err := place("orders", 1, 5, nodes); err == nil {
		t.Fatal("five replicas placed on four nodes")
	}
}

// With three zones each partition has a replica in each, and leaders and
// replicas stay even over the nodes.
func TestPlaceSpreadsReplicasOverZones(t *testing.T) {
	nodes := nodesOf(map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "b", "n5": "c", "n6": "c"})
	zone := map[string]string{}
	for _, n := range nodes {
		zone[n.ID] = n.Zone
	}
	states, err := place("t", 12, 3, nodes)
	if err != nil {
		t.Fatal(err)
	}
	leaders, held := map[string]int{}, map[string]int{}
	for _, st := range states {
		leaders[st.Leader]++
		for _, n := range st.ISR {
			held[n]++
		}
	}
	for _, n := range nodes {
		if leaders[n.ID] != 2 || held[n.ID] != 6 {
			t.Fatalf("uneven: %d leaders and %d replicas on %s", leaders[n.ID], held[n.ID], n.ID)
		}
	}
	for _, st := range states {
		zones := map[string]bool{}
		for _, n := range st.ISR {
			zones[zone[n]] = true
		}
		if len(zones) != 3 {
			t.Fatalf("partition %d on %v: zones %v", st.Partition, st.ISR, zones)
		}
	}
}

// An expand goes on with the topic's round where it left off, so on the
// nodes the topic was created on it is placed as if created with all its
// partitions; a node added since gets the new leaders first.
func TestPlaceMoreGoesOnWithTheRound(t *testing.T) {
	nodes := nodesOf(map[string]string{"n1": "", "n2": "", "n3": ""})
	all, _ := place("t", 6, 2, nodes)
	more, err := placeMore("t", []int32{2, 3, 4, 5}, 2, nodes, all[:2])
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(more) != fmt.Sprint(all[2:]) {
		t.Fatalf("expand placed\n%v\nwant as at creation\n%v", more, all[2:])
	}

	grown := append(slices.Clone(nodes), cluster.NodeInfo{ID: "n4"})
	more, _ = placeMore("t", []int32{2, 3}, 2, grown, all[:2])
	leaders := map[string]int{}
	for _, st := range slices.Concat(all[:2], more) {
		leaders[st.Leader]++
	}
	if leaders["n4"] != 1 || len(leaders) != 4 {
		t.Fatalf("leaders after expanding onto a new node: %v, want one on each", leaders)
	}
}
