package cluster

import (
	"errors"
	"fmt"
	"slices"
)

// Move is a change of a partition's replicas that the controller carries
// out in steps, stored in the partition's state so that every step is a
// compare-and-swap of the same key and a new controller picks the move up
// where the last one left it: the nodes of Add enter as catch-up replicas
// and join the ISR through the leader's usual catch-up and join; only once
// all are in sync do the nodes of Remove leave (leadership first, if the
// leader is one of them). So the partition never has fewer in-sync copies
// than before. A move that adds only raises the replica count, one that
// removes only lowers it.
type Move struct {
	Add    []string
	Remove []string
}

// Active reports whether a move is under way.
func (m Move) Active() bool { return len(m.Add)+len(m.Remove) > 0 }

func (m Move) valid() error {
	for _, n := range slices.Concat(m.Add, m.Remove) {
		if n == "" {
			return errors.New("empty node ID in a move")
		}
	}
	for _, n := range m.Add {
		if slices.Contains(m.Remove, n) {
			return fmt.Errorf("move adds and removes node %q", n)
		}
	}
	return nil
}

// DefaultMaxMoves is how many replica moves drains and the balance keep
// under way at once by default.
const DefaultMaxMoves = 8

// Errors refusing a move.
var (
	ErrMoveInProgress = errors.New("the partition is already moving replicas")
	ErrBadMove        = errors.New("invalid replica move")
)

// MoveStep is what the controller does next for a partition's move.
type MoveStep int

const (
	MoveWaiting    MoveStep = iota // for failover, or for targets to catch up and join
	MoveAdding                     // targets enter the catch-up list
	MoveHandingOff                 // the leader is to be removed: another in-sync replica leads
	MoveRemoving                   // every target is in sync: the sources leave; done
	MoveRolledBack                 // a target died: it leaves, the sources stay; done
)

func (s MoveStep) String() string {
	return [...]string{"waiting", "adding", "handing off", "removing", "rolled back"}[s]
}

// requestMove starts a move on st: add and remove name nodes to add (not
// holding the partition, live) and to remove (holding it). The move must
// leave at least one replica and start on a partition not moving already.
func requestMove(st PartitionState, m Move, live map[string]bool) (PartitionState, error) {
	if st.Move.Active() {
		return st, ErrMoveInProgress
	}
	if !m.Active() {
		return st, fmt.Errorf("%w: nothing to add or remove", ErrBadMove)
	}
	if err := m.valid(); err != nil {
		return st, fmt.Errorf("%w: %v", ErrBadMove, err)
	}
	held := slices.Concat(st.ISR, st.Catchup)
	for _, n := range m.Add {
		if slices.Contains(held, n) {
			return st, fmt.Errorf("%w: node %q already holds the partition", ErrBadMove, n)
		}
		if !live[n] {
			return st, fmt.Errorf("%w: node %q is not live", ErrBadMove, n)
		}
	}
	for _, n := range m.Remove {
		if !slices.Contains(held, n) {
			return st, fmt.Errorf("%w: node %q does not hold the partition", ErrBadMove, n)
		}
	}
	if len(held)+len(m.Add)-len(m.Remove) < 1 {
		return st, fmt.Errorf("%w: no replica would be left", ErrBadMove)
	}
	next := st
	next.Move = Move{Add: slices.Clone(m.Add), Remove: slices.Clone(m.Remove)}
	return next, nil
}

// planMove is the next step of st's move given the live nodes, and the
// state that step stores; a hand-off is counted into leads, the
// partitions each node leads. It does no I/O: the controller stores next
// by compare-and-swap when step is not MoveWaiting.
func planMove(st PartitionState, live map[string]bool, leads map[string]int) (next PartitionState, step MoveStep) {
	m := st.Move
	if !m.Active() || !live[st.Leader] {
		return st, MoveWaiting // a leaderless partition is failover's first
	}
	next = st
	for _, n := range m.Add {
		if !live[n] && len(m.Remove) == 0 {
			// A move that only adds (a replica count raised) has no
			// source to fall back on: rolled back, it would leave the
			// partition short of its topic's count for good. It waits for
			// its target to come back, or for repair to put the replica
			// elsewhere (planRepairs).
			return st, MoveWaiting
		}
		if !live[n] {
			next.ISR = without(st.ISR, m.Add...)
			next.Catchup = without(st.Catchup, m.Add...)
			next.Move = Move{}
			return next, MoveRolledBack
		}
	}
	if missing := without(m.Add, slices.Concat(st.ISR, st.Catchup)...); len(missing) > 0 {
		next.Catchup = append(slices.Clone(st.Catchup), missing...)
		return next, MoveAdding
	}
	for _, n := range m.Add {
		if !slices.Contains(st.ISR, n) {
			return st, MoveWaiting
		}
	}
	if slices.Contains(m.Remove, st.Leader) {
		// A leader move, as a drain makes: the old leader's writes in
		// flight fail and its publishers retry on the new one.
		if next, ok := leaderOff(st, live, leads, nil); ok {
			return next, MoveHandingOff
		}
		return st, MoveWaiting
	}
	next.ISR = without(st.ISR, m.Remove...)
	next.Catchup = without(st.Catchup, m.Remove...)
	next.Replicas = int32(len(next.ISR) + len(next.Catchup))
	if len(next.ISR) <= int(next.Replicas)/2 {
		return st, MoveWaiting // a follower left the ISR meanwhile: wait for it
	}
	next.Move = Move{}
	return next, MoveRemoving
}

// without is list less the nodes given, as a new slice.
func without(list []string, nodes ...string) []string {
	var out []string
	for _, n := range list {
		if !slices.Contains(nodes, n) {
			out = append(out, n)
		}
	}
	return out
}

// replicaCountMoves plans the moves that bring every partition of topic
// to r replicas: the nodes of live spreadTarget picks (in the zone the
// partition lacks most, then holding the fewest replicas of all of states)
// are added; removable picks those removed. A partition
// moving already is refused, unless its move ends at r anyway, so asking
// twice is harmless. It does no I/O.
func replicaCountMoves(states []PartitionState, topic string, r int, live []NodeInfo) ([]PartitionState, error) {
	if r < 1 {
		return nil, fmt.Errorf("%w: %d replicas", ErrBadMove, r)
	}
	if r > len(live) {
		return nil, fmt.Errorf("%w: %d replicas, %d live nodes", ErrBadMove, r, len(live))
	}
	isLive, zoneOf := nodeIDs(live), zonesOfNodes(live)
	load := replicaLoad(states)
	var out []PartitionState
	for _, st := range states {
		if st.Topic != topic {
			continue
		}
		st, dropped := withoutStrandedAdds(st, isLive)
		held := slices.Concat(st.ISR, st.Catchup)
		if st.Move.Active() {
			if len(held)+len(without(st.Move.Add, held...))-len(st.Move.Remove) == r {
				continue
			}
			return nil, fmt.Errorf("%w: %s", ErrMoveInProgress, partitionName(st.Topic, st.Partition))
		}
		var m Move
		placed := st
		for range r - len(held) {
			to := spreadTarget(placed, "", live, load)
			if to == "" {
				return nil, fmt.Errorf("%w: no live node for another replica of %s", ErrBadMove, partitionName(st.Topic, st.Partition))
			}
			m.Add = append(m.Add, to)
			placed.Catchup = append(slices.Clone(placed.Catchup), to)
			load[to]++
		}
		m.Remove = removable(st, len(held)-r, zoneOf)
		if !m.Active() {
			if dropped {
				out = append(out, st)
			}
			continue
		}
		next, err := requestMove(st, m, isLive)
		if err != nil {
			return nil, err
		}
		out = append(out, next)
	}
	return out, nil
}

// withoutStrandedAdds ends a move that only adds replicas and waits for a
// target that is not live (planMove), dropping the targets not live from
// the catch-up list: a replica count asked for again is planned from the
// replicas the partition has, rather than refused until the target comes
// back or repair places it elsewhere. A target that joined the ISR stays.
func withoutStrandedAdds(st PartitionState, live map[string]bool) (PartitionState, bool) {
	m := st.Move
	if !m.Active() || len(m.Remove) > 0 {
		return st, false
	}
	var dead []string
	for _, n := range m.Add {
		if !live[n] && !slices.Contains(st.ISR, n) {
			dead = append(dead, n)
		}
	}
	if len(dead) == 0 {
		return st, false
	}
	st.Catchup = without(st.Catchup, dead...)
	st.Move = Move{}
	return st, true
}

// removable is n replicas of st to remove, never the leader: each from
// the zone holding the most of st's replicas left (spreadRemovals), and
// within it catching-up replicas first, then ISR followers from the last.
func removable(st PartitionState, n int, zoneOf map[string]string) []string {
	var order []string
	order = append(order, st.Catchup...)
	for i := len(st.ISR) - 1; i >= 0; i-- {
		if st.ISR[i] != st.Leader {
			order = append(order, st.ISR[i])
		}
	}
	return spreadRemovals(st, order, max(0, n), zoneOf)
}

// replicaLoad is how many replicas each node holds.
func replicaLoad(states []PartitionState) map[string]int {
	load := map[string]int{}
	for _, st := range states {
		for _, n := range slices.Concat(st.ISR, st.Catchup) {
			load[n]++
		}
	}
	return load
}
