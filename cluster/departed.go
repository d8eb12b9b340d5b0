package cluster

import (
	"context"
	"errors"
	"slices"
)

// When a node leaves the live set, the partitions it led get new leaders
// (failover), and the partitions it followed in lose it from their ISRs
// here, in the controller's few transactions, rather than each leader
// finding its follower gone and asking for its own shrink: with thousands
// of partitions those one-by-one shrinks came at a few hundred a second
// through an etcd already busy with the elections, and every write of a
// partition still waiting for its shrink waited with it. The state
// stored is the one the leader's own shrink would store (shrunk): the
// departed node moves to catching up and rejoins as any lagging replica
// does. A node that left but lives (its registration lapsed) is treated
// as its leaderships are: as gone.

// departedShrinks is, for every partition led by a live node whose ISR
// holds nodes that are not live, its state with those nodes shrunk out.
// A partition that would keep no majority of its replicas in sync is left
// to its leader, which stops taking writes until enough rejoin.
func departedShrinks(states []PartitionState, live map[string]bool) []PartitionState {
	var out []PartitionState
	for _, st := range states {
		if st.Leader == "" || !live[st.Leader] {
			continue
		}
		var gone []string
		for _, n := range st.ISR {
			if !live[n] {
				gone = append(gone, n)
			}
		}
		if len(gone) == 0 {
			continue
		}
		if next, changed, err := shrunk(st, st.Leader, gone); err == nil && changed {
			out = append(out, next)
		}
	}
	return out
}

// shrinkDeparted stores departedShrinks for the view's partitions. A
// partition changed meanwhile (its leader's own shrink, a new leader) is
// left as it is now: the next check sees it again if it still needs it.
func (c *Controller) shrinkDeparted(ctx context.Context, view partitionView, live []NodeInfo) {
	if live == nil {
		return
	}
	next := departedShrinks(view.states(), nodeIDs(live))
	if len(next) == 0 {
		return
	}
	shrunkOut, conflicts := 0, 0
	for i, res := range c.Assignments.CompareAndSwapAll(ctx, next) {
		view.stored(res)
		switch {
		case res.Err == nil:
			shrunkOut++
		case errors.Is(res.Err, ErrConflict):
			conflicts++
		case ctx.Err() == nil:
			c.Logger.Warn("shrinking a departed node out of an ISR", "topic", next[i].Topic, "partition", next[i].Partition, "err", res.Err)
		}
	}
	c.Logger.Info("departed nodes shrunk out of ISRs", "partitions", shrunkOut, "conflicts", conflicts,
		"departed", departedOf(next, nodeIDs(live)))
}

// departedOf names the nodes the shrinks remove, for the log.
func departedOf(states []PartitionState, live map[string]bool) []string {
	var out []string
	for _, st := range states {
		for _, n := range st.Catchup {
			if !live[n] && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
