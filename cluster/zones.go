package cluster

import (
	"cmp"
	"math"
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

// staying is st's replicas that stay where they are: those it holds or is
// moving to, less those its move removes and the one leaving.
func staying(st PartitionState, leaving string) []string {
	out := without(holders(st), append(slices.Clone(st.Move.Remove), leaving)...)
	return append(out, without(st.Move.Add, slices.Concat(out, holders(st), []string{leaving})...)...)
}

// zoneCounts counts nodes on each zone, as far as zoneOf tells the nodes'
// zones; a node it does not name counts for no zone.
func zoneCounts(nodes []string, zoneOf map[string]string) map[string]int {
	out := map[string]int{}
	for _, n := range nodes {
		if z, known := zoneOf[n]; known {
			out[z]++
		}
	}
	return out
}

func zonesOfNodes(nodes []NodeInfo) map[string]string {
	out := make(map[string]string, len(nodes))
	for _, n := range nodes {
		out[n.ID] = n.Zone
	}
	return out
}

// spreadTarget is where a replica of st goes, the one on leaving (if any)
// leaving it: of candidates, a node holding none of st in the zone
// holding the fewest of st's replicas that stay, of those the one holding
// the fewest replicas by load, then the first by ID; "" if none may take
// it. Replicas count for their zone only on candidates, so a node gone or
// being drained lends its zone none. Every target the controller chooses,
// for repair, a drain, the balance or a replica count, is this one, so a
// partition keeps its replicas in as many zones as there are; without
// zones only the load counts.
func spreadTarget(st PartitionState, leaving string, candidates []NodeInfo, load map[string]int) string {
	zoneOf := zonesOfNodes(candidates)
	stay := staying(st, leaving)
	inZone := zoneCounts(stay, zoneOf)
	best := ""
	for _, n := range candidates {
		if n.ID == leaving || n.ID == st.Leader || slices.Contains(stay, n.ID) || slices.Contains(holders(st), n.ID) {
			continue
		}
		if best == "" || cmp.Or(cmp.Compare(inZone[n.Zone], inZone[zoneOf[best]]), cmp.Compare(load[n.ID], load[best]), cmp.Compare(n.ID, best)) < 0 {
			best = n.ID
		}
	}
	return best
}

// keepsSpread reports whether moving st's replica from one node to
// another leaves its replicas at least as spread over zones: the zone
// gained holds, with the move, no more of them than the zone left held
// before it. The balance, which has a choice, makes no move that would
// crowd a zone; a drain or repair must move the replica anyway.
func keepsSpread(st PartitionState, from, to string, zoneOf map[string]string) bool {
	inZone := zoneCounts(staying(st, from), zoneOf)
	return inZone[zoneOf[to]] <= inZone[zoneOf[from]]
}

// spreadRemovals is n of order to remove from st, order being who goes
// first when zones do not decide: each next one from the zone holding the
// most of st's replicas left, so the replicas that stay are as spread as
// they can be. A node zoneOf does not name (gone, or drained) goes
// before any.
func spreadRemovals(st PartitionState, order []string, n int, zoneOf map[string]string) []string {
	order = slices.Clone(order)
	inZone := zoneCounts(holders(st), zoneOf)
	crowd := func(n string) int {
		if z, known := zoneOf[n]; known {
			return inZone[z]
		}
		return math.MaxInt
	}
	var out []string
	for len(out) < n && len(order) > 0 {
		best := 0
		for i, x := range order {
			if crowd(x) > crowd(order[best]) {
				best = i
			}
		}
		out = append(out, order[best])
		inZone[zoneOf[order[best]]]--
		order = slices.Delete(order, best, best+1)
	}
	return out
}
