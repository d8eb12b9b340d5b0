package cluster

import (
	"slices"
)

// ClusterStats is the cluster's health at a glance, for youzan's
// nsqlookupd /cluster/stats: what an operator checks before restarting the
// next node of a rolling upgrade or after a failure.
type ClusterStats struct {
	// Stable: every partition has a live leader, as many live ISR members
	// as replicas, takes writes and is not moving, and no upgrade is under
	// way (youzan's "stable", which an upgrade also clears).
	Stable     bool
	Upgrade    Upgrade // the rolling upgrade under way, if any
	Controller string  // the elected controller's node ID, "" for none
	Nodes      []NodeStats
	// Gone are the nodes that hold replicas but are not registered.
	Gone       []string
	Partitions int
	Leaderless int // no leader, or one not registered
	// UnderReplicated: fewer live ISR members than replicas. A leader
	// drops a dead follower from the ISR only when a write needs it, so
	// the ISR alone would hide an idle partition's loss.
	UnderReplicated int
	WriteDisabled   int
	Moving          int // a replica move under way
}

// NodeStats is one live node's share of the cluster.
type NodeStats struct {
	Node NodeInfo
	NodeLoad
	Draining bool
}

// Summarize describes states as the live nodes, the drained ones, the
// upgrade mark and the controller stand. It does no I/O.
func Summarize(states []PartitionState, live []NodeInfo, draining map[string]bool, upgrade Upgrade, controller string) ClusterStats {
	isLive := nodeIDs(live)
	loads := Loads(states)
	out := ClusterStats{Upgrade: upgrade, Controller: controller, Partitions: len(states)}
	for _, n := range live {
		out.Nodes = append(out.Nodes, NodeStats{Node: n, NodeLoad: loads[n.ID], Draining: draining[n.ID]})
	}
	for id := range loads {
		if !isLive[id] {
			out.Gone = append(out.Gone, id)
		}
	}
	slices.Sort(out.Gone)
	for _, st := range states {
		if st.Leader == "" || !isLive[st.Leader] {
			out.Leaderless++
		}
		inSync := 0
		for _, n := range st.ISR {
			if isLive[n] {
				inSync++
			}
		}
		if inSync < int(st.Replicas) {
			out.UnderReplicated++
		}
		if st.WriteDisabled {
			out.WriteDisabled++
		}
		if st.Move.Active() {
			out.Moving++
		}
	}
	out.Stable = out.Leaderless == 0 && out.UnderReplicated == 0 && out.WriteDisabled == 0 && out.Moving == 0 && !upgrade.Active()
	return out
}
