package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A drained node is one the operator retires (youzan's
// /cluster/node/remove): the controller moves every replica off it, its
// leaderships handed over as the moves go, and places none on it. The mark
// is a key of its own, not part of the node's registration, so it outlives
// the node's lease and restarts:
//
//	<prefix>draining/<node>

func drainingPrefix(prefix string) string { return keyPrefix(prefix) + "draining/" }

// Drain marks node to be drained.
func (a *Assignments) Drain(ctx context.Context, node string) error {
	if node == "" || len(node) > maxNodeIDLength || strings.Contains(node, "/") {
		return fmt.Errorf("%w: node ID %q", ErrBadMove, node)
	}
	if _, err := a.cli.Put(ctx, drainingPrefix(a.prefix)+node, ""); err != nil {
		return fmt.Errorf("drain %s: %w", node, err)
	}
	return nil
}

// Draining is the set of nodes marked to be drained.
func (a *Assignments) Draining(ctx context.Context) (map[string]bool, error) {
	resp, err := a.cli.Get(ctx, drainingPrefix(a.prefix), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list drained nodes: %w", err)
	}
	out := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[strings.TrimPrefix(string(kv.Key), drainingPrefix(a.prefix))] = true
	}
	return out, nil
}

// NodeLoad is what a node holds, for /nodes: the replicas and leaderships
// a drain still has to move off it.
type NodeLoad struct {
	Replicas, Leading int
}

// Loads counts each node's replicas and leaderships in states.
func Loads(states []PartitionState) map[string]NodeLoad {
	out := map[string]NodeLoad{}
	for _, st := range states {
		for _, n := range holders(st) {
			l := out[n]
			l.Replicas++
			if n == st.Leader {
				l.Leading++
			}
			out[n] = l
		}
	}
	return out
}

func holders(st PartitionState) []string { return slices.Concat(st.ISR, st.Catchup) }

// withLeaving is draining with the live nodes that are stopping
// (NodeInfo.Leaving) added.
func withLeaving(draining map[string]bool, live []NodeInfo) map[string]bool {
	var out map[string]bool
	for _, n := range live {
		if !n.Leaving {
			continue
		}
		if out == nil {
			out = maps.Clone(draining)
			if out == nil {
				out = map[string]bool{}
			}
		}
		out[n.ID] = true
	}
	if out == nil {
		return draining
	}
	return out
}

// placeable is the live nodes that may receive replicas: not drained.
func placeable(live []NodeInfo, draining map[string]bool) []NodeInfo {
	return slices.DeleteFunc(slices.Clone(live), func(n NodeInfo) bool { return draining[n.ID] })
}

// movable: a partition a drain or the balance may start a move on now.
func movable(st PartitionState, isLive map[string]bool) bool {
	return !st.Move.Active() && isLive[st.Leader]
}

// planDrain starts, within budget, the moves that take a replica off a
// drained node to the placeable node spreadTarget picks: holding none of
// that partition, in the zone the partition lacks most, then holding the
// fewest replicas. It does no I/O.
func planDrain(states []PartitionState, live []NodeInfo, draining map[string]bool, budget int) []PartitionState {
	if len(draining) == 0 {
		return nil
	}
	targets, isLive, load := placeable(live, draining), nodeIDs(live), replicaLoad(states)
	var out []PartitionState
	for _, st := range states {
		if len(out) >= budget {
			break
		}
		if !movable(st, isLive) {
			continue
		}
		i := slices.IndexFunc(holders(st), func(n string) bool { return draining[n] })
		if i < 0 {
			continue
		}
		from := holders(st)[i]
		if next, ok := planOneMove(st, from, spreadTarget(st, from, targets, load), isLive, load); ok {
			out = append(out, next)
		}
	}
	return out
}

// planOneMove is st with a move of from's replica to to, counted into
// load.
func planOneMove(st PartitionState, from, to string, isLive map[string]bool, load map[string]int) (PartitionState, bool) {
	if to == "" {
		return st, false
	}
	next, err := requestMove(st, Move{Add: []string{to}, Remove: []string{from}}, isLive)
	if err != nil {
		return st, false
	}
	load[to]++
	load[from]--
	return next, true
}

// planBalance starts, within budget, moves from the node holding the most
// replicas to the one holding the fewest (of the placeable nodes), until
// no node holds more than the average rounded up plus one nor fewer than
// the average rounded down minus one (so a node that joins receives
// replicas), counting the moves under way at their end. Followers'
// replicas move before leaders', which would need a hand-off, and no move
// leaves a partition's replicas in fewer zones. It does no I/O.
func planBalance(states []PartitionState, live []NodeInfo, draining map[string]bool, budget int) []PartitionState {
	targets, isLive := placeable(live, draining), nodeIDs(live)
	if len(targets) < 2 {
		return nil
	}
	load := map[string]int{}
	total := 0
	for _, st := range states {
		for _, n := range slices.Concat(without(holders(st), st.Move.Remove...), without(st.Move.Add, holders(st)...)) {
			load[n]++
			total++
		}
	}
	ceiling := (total+len(targets)-1)/len(targets) + 1
	floor := total/len(targets) - 1
	var out []PartitionState
	moved := map[PartitionRef]bool{}
	for len(out) < budget {
		if load[mostLoaded(targets, load)] <= ceiling && load[spreadTarget(PartitionState{}, "", targets, load)] >= floor {
			break
		}
		next, ok := balanceMove(states, targets, isLive, load, moved)
		if !ok {
			break
		}
		moved[next.Ref()] = true
		out = append(out, next)
	}
	return out
}

// balanceMove plans one move off the most loaded node that has one to
// make: zones may leave a node no move that keeps its partitions' spread.
func balanceMove(states []PartitionState, targets []NodeInfo, isLive map[string]bool, load map[string]int, moved map[PartitionRef]bool) (PartitionState, bool) {
	sources := slices.Clone(targets)
	slices.SortFunc(sources, func(x, y NodeInfo) int { return cmp.Or(cmp.Compare(load[y.ID], load[x.ID]), cmp.Compare(x.ID, y.ID)) })
	for _, from := range sources {
		if next, ok := balanceMoveFrom(states, from.ID, targets, isLive, load, moved); ok {
			return next, true
		}
	}
	return PartitionState{}, false
}

// balanceMoveFrom plans the move of one of from's replicas, a follower's
// if it has any movable one, to the node spreadTarget picks, if that
// narrows the gap between them and crowds no zone.
func balanceMoveFrom(states []PartitionState, from string, targets []NodeInfo, isLive map[string]bool, load map[string]int, moved map[PartitionRef]bool) (PartitionState, bool) {
	candidates := slices.DeleteFunc(slices.Clone(states), func(st PartitionState) bool {
		return moved[st.Ref()] || !movable(st, isLive) || !slices.Contains(holders(st), from)
	})
	slices.SortStableFunc(candidates, func(x, y PartitionState) int {
		return cmp.Compare(boolRank(x.Leader == from), boolRank(y.Leader == from))
	})
	zoneOf := zonesOfNodes(targets)
	for _, st := range candidates {
		to := spreadTarget(st, from, targets, load)
		if to == "" || load[to]+1 >= load[from] || !keepsSpread(st, from, to, zoneOf) {
			continue // moving would not even out anything, or would crowd a zone
		}
		return planOneMove(st, from, to, isLive, load)
	}
	return PartitionState{}, false
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// mostLoaded is the node of nodes holding the most replicas, the first by
// ID on a tie.
func mostLoaded(nodes []NodeInfo, load map[string]int) string {
	best := ""
	for _, n := range nodes {
		if best == "" || load[n.ID] > load[best] || load[n.ID] == load[best] && n.ID < best {
			best = n.ID
		}
	}
	return best
}

// ErrDrainBlocked: a drain that could never finish, refused before it
// starts.
var ErrDrainBlocked = errors.New("the drain cannot finish")

// DrainBlocked is the partitions holding a replica on node that no node
// could take it from, were node drained too: every live node that is not
// drained already holds one of the partition's replicas. Such a drain
// would wait for ever; the partitions' replica count must drop, or a node
// join, first. A partition moving now is judged as its move will leave it.
// It does no I/O.
func DrainBlocked(states []PartitionState, live []NodeInfo, draining map[string]bool, node string) []PartitionRef {
	drained := maps.Clone(draining)
	if drained == nil {
		drained = map[string]bool{}
	}
	drained[node] = true
	targets := placeable(live, drained)
	var out []PartitionRef
	for _, st := range states {
		holds := slices.Concat(holders(st), st.Move.Add)
		if !slices.Contains(holds, node) || slices.Contains(st.Move.Remove, node) {
			continue
		}
		if !slices.ContainsFunc(targets, func(n NodeInfo) bool { return !slices.Contains(holds, n.ID) }) {
			out = append(out, st.Ref())
		}
	}
	return out
}
