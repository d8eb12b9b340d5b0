package cluster

import (
	"cmp"
	"slices"
)

// Zones are failure domains (a rack, a room, a cloud zone) named by each
// node's --zone. A partition whose replicas sit in as many zones as there
// are keeps a majority when one zone goes down, given three zones or more.
// The rules here are pure: placement at creation and expand, and the
// controller's repair, use them on what they read.

// InterleaveZones orders nodes so that zones take turns: the first node of
// each zone, then the second of each, and so on (zones by name, nodes by
// ID within one). Consecutive nodes of the order, taken round-robin as
// placement does, are in different zones as long as zones last, and each
// node is taken as often as any other. Without zones it is the nodes
// sorted by ID.
func InterleaveZones(nodes []NodeInfo) []NodeInfo {
	byZone := map[string][]NodeInfo{}
	for _, n := range nodes {
		byZone[n.Zone] = append(byZone[n.Zone], n)
	}
	zones := make([]string, 0, len(byZone))
	for z, members := range byZone {
		zones = append(zones, z)
		slices.SortFunc(members, func(a, b NodeInfo) int { return cmp.Compare(a.ID, b.ID) })
	}
	slices.Sort(zones)
	out := make([]NodeInfo, 0, len(nodes))
	for i := 0; len(out) < len(nodes); i++ {
		for _, z := range zones {
			if i < len(byZone[z]) {
				out = append(out, byZone[z][i])
			}
		}
	}
	return out
}

// SpreadReplicas picks a partition's replicas from order, taken as a
// ring: the node at first leads, and each next replica is, walking on from
// the previous pick, the first node not yet picked whose zone holds the
// fewest of the replicas picked so far. Without zones that is simply
// order[first], order[first+1], ...; with an order from InterleaveZones
// the replicas fill every zone once before any zone twice.
func SpreadReplicas(order []NodeInfo, first, replicas int) []string {
	n := len(order)
	replicas = min(replicas, n)
	picked := make([]string, 0, replicas)
	taken := make([]bool, n)
	inZone := map[string]int{}
	at := first % n
	for len(picked) < replicas {
		best := -1
		for step := range n {
			i := (at + step) % n
			if taken[i] {
				continue
			}
			if best < 0 || inZone[order[i].Zone] < inZone[order[best].Zone] {
				best = i
			}
		}
		taken[best] = true
		inZone[order[best].Zone]++
		picked = append(picked, order[best].ID)
		at = best + 1
	}
	return picked
}

// zoneLoad counts the replicas of st on each zone, as far as live tells
// the nodes' zones; a node not live counts for no zone.
func zoneLoad(st PartitionState, zoneOf map[string]string) map[string]int {
	out := map[string]int{}
	for _, n := range slices.Concat(st.ISR, st.Catchup) {
		if z, live := zoneOf[n]; live {
			out[z]++
		}
	}
	return out
}
