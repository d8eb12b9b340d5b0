package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// A leader move hands a partition's leadership from its live leader to
// another live ISR member: asked by an operator, by the leader balance, or
// by draining a node. Like an election it is a compare-and-swap of the
// partition's state that only the controller stores, so a move and an
// election never both win. The rules of this file are pure; controller.go
// stores what they decide.

// Why a leadership moved, as the controller logs and counts it.
const (
	MoveAsked   = "asked"   // /topic/partition/move?move_leader=true
	MoveBalance = "balance" // back to the preferred replica
	MoveDrain   = "drain"   // off a node being emptied
	MoveLeaving = "leaving" // off a node that is stopping (NodeInfo.Leaving)
)

var (
	ErrNoLiveLeader   = errors.New("the partition has no live leader: failover elects one first")
	ErrTargetNotInISR = errors.New("the target is not in the ISR")
	ErrTargetNotLive  = errors.New("the target node is not registered")
	ErrAlreadyLeader  = errors.New("the target already leads the partition")
	ErrNoTarget       = errors.New("no other live ISR member to lead")
	ErrLeaderMoved    = errors.New("the leadership moved since the move was asked")
)

// leaderMove is a partition's next state, its leadership on another node.
type leaderMove struct {
	Next   PartitionState
	From   string
	Reason string
}

// handOver is st led by to. Followers commit a write before their leader
// does, so to holds every write the old leader acknowledged; the new
// EpochForWrite fences off what the old leader still had in flight, which
// its publishers hear failed. The old leader stays in the ISR: the new
// leader catches it up from its committed end before the next commit,
// which waits for it. Writes are enabled, as after an election.
func handOver(st PartitionState, to string, live map[string]bool) (PartitionState, error) {
	switch {
	case st.Leader == "" || !live[st.Leader]:
		return st, ErrNoLiveLeader
	case to == st.Leader:
		return st, ErrAlreadyLeader
	case !slices.Contains(st.ISR, to):
		return st, fmt.Errorf("%q: %w %v", to, ErrTargetNotInISR, st.ISR)
	case !live[to]:
		return st, fmt.Errorf("%q: %w", to, ErrTargetNotLive)
	}
	next := st
	next.Leader = to
	next.ISR = slices.Clone(st.ISR)
	next.Catchup = slices.Clone(st.Catchup)
	next.EpochForWrite++
	next.LeaderSession = Leadership(to, next.EpochForWrite)
	next.WriteDisabled = false
	return next, nil
}

// pickLeader chooses where st's leadership goes when no node is named: its
// preferred replica if that may lead, else the live ISR member leading the
// fewest partitions (by leads), the first in ISR order on a tie. It returns
// "" when no member but the leader may lead. Nodes in avoid never lead.
func pickLeader(st PartitionState, live map[string]bool, leads map[string]int, avoid map[string]bool) string {
	eligible := func(n string) bool { return n != st.Leader && live[n] && !avoid[n] && slices.Contains(st.ISR, n) }
	if st.Preferred != "" && eligible(st.Preferred) {
		return st.Preferred
	}
	best := ""
	for _, n := range st.ISR {
		if eligible(n) && (best == "" || leads[n] < leads[best]) {
			best = n
		}
	}
	return best
}

// leaderships counts the partitions each node leads.
func leaderships(states []PartitionState) map[string]int {
	leads := map[string]int{}
	for _, st := range states {
		if st.Leader != "" {
			leads[st.Leader]++
		}
	}
	return leads
}

// LeaderMoveAsk is an operator's request, stored in etcd until the
// controller decides it, that a partition's leadership move from From, its
// leader when asked, to To (chosen by pickLeader when empty). Revision is
// the request key's etcd ModRevision; 0 reports a request deleted.
type LeaderMoveAsk struct {
	Ref      PartitionRef
	From, To string
	Revision int64
}

// refusedAsk is an ask the controller decided not to carry out.
type refusedAsk struct {
	Ask LeaderMoveAsk
	Err error
}

// planAskedMoves decides every ask against the partitions' states. An ask
// whose partition's leader is no longer From was overtaken (an election, or
// this very ask carried out already, and seen again), so it is refused
// rather than moving the leadership a second time.
func planAskedMoves(asks []LeaderMoveAsk, states map[PartitionRef]PartitionState, live map[string]bool) (moves []leaderMove, refused []refusedAsk) {
	leads := leaderships(slices.Collect(maps.Values(states)))
	slices.SortFunc(asks, func(x, y LeaderMoveAsk) int { return compareRefs(x.Ref, y.Ref) })
	for _, ask := range asks {
		st, ok := states[ask.Ref]
		if !ok {
			refused = append(refused, refusedAsk{ask, ErrPartitionNotFound})
			continue
		}
		if st.Leader != ask.From {
			refused = append(refused, refusedAsk{ask, fmt.Errorf("%w: %q leads, asked from %q", ErrLeaderMoved, st.Leader, ask.From)})
			continue
		}
		to := ask.To
		if to == "" {
			if to = pickLeader(st, live, leads, nil); to == "" {
				refused = append(refused, refusedAsk{ask, ErrNoTarget})
				continue
			}
		}
		next, err := handOver(st, to, live)
		if err != nil {
			refused = append(refused, refusedAsk{ask, err})
			continue
		}
		leads[st.Leader]--
		leads[to]++
		moves = append(moves, leaderMove{Next: next, From: st.Leader, Reason: MoveAsked})
	}
	return moves, refused
}

// planLeaderBalance gives leadership back to the preferred replica of at
// most limit partitions whose preferred replica is live and in the ISR but
// does not lead, in topic and partition order. A partition without a live
// leader is failover's, and one whose leader disabled its writes is left
// alone until it takes writes again. Nodes in avoid (being drained) get no
// leadership back.
func planLeaderBalance(states []PartitionState, live, avoid map[string]bool, limit int) []leaderMove {
	var moves []leaderMove
	for _, st := range sortedStates(states) {
		if len(moves) >= limit {
			break
		}
		if st.Preferred == "" || st.Preferred == st.Leader || st.WriteDisabled || avoid[st.Preferred] {
			continue
		}
		next, err := handOver(st, st.Preferred, live)
		if err != nil {
			continue
		}
		moves = append(moves, leaderMove{Next: next, From: st.Leader, Reason: MoveBalance})
	}
	return moves
}

// planLeadersOff moves the leadership of every partition led by a node of
// off (being drained, or stopping) to another live ISR member, by
// leaderOff, spreading what it moves over the nodes leading the fewest.
// Each move's reason is the node's: MoveLeaving off a stopping node
// (NodeInfo.Leaving), MoveDrain off any other. stuck lists the partitions
// with no other live ISR member, which keep their leader.
func planLeadersOff(states []PartitionState, live []NodeInfo, off map[string]bool) (moves []leaderMove, stuck []PartitionRef) {
	led := slices.DeleteFunc(slices.Clone(states), func(st PartitionState) bool { return !off[st.Leader] })
	if len(led) == 0 {
		return nil, nil
	}
	ids := nodeIDs(live)
	reasons := make(map[string]string, len(off))
	for _, n := range live {
		if off[n.ID] && n.Leaving {
			reasons[n.ID] = MoveLeaving
		}
	}
	leads := leaderships(states)
	sortPartitions(led)
	for _, st := range led {
		next, ok := leaderOff(st, ids, leads, off)
		if !ok {
			stuck = append(stuck, st.Ref())
			continue
		}
		moves = append(moves, leaderMove{Next: next, From: st.Leader, Reason: cmp.Or(reasons[st.Leader], MoveDrain)})
	}
	return moves, stuck
}

// leaderOff is st led by another live ISR member, chosen by pickLeader
// and counted into leads, for a leader that is to go: one being drained,
// or whose replica a move removes. Neither a node of avoid nor one the
// move removes leads next, so the leadership moves once. It is the one
// hand-over of both, a leader move ([handOver]).
func leaderOff(st PartitionState, live map[string]bool, leads map[string]int, avoid map[string]bool) (PartitionState, bool) {
	leaving := maps.Clone(avoid)
	if leaving == nil {
		leaving = map[string]bool{}
	}
	leaving[st.Leader] = true
	for _, n := range st.Move.Remove {
		leaving[n] = true
	}
	to := pickLeader(st, live, leads, leaving)
	if to == "" {
		return st, false
	}
	next, err := handOver(st, to, live)
	if err != nil {
		return st, false
	}
	leads[st.Leader]--
	leads[to]++
	return next, true
}

func sortedStates(states []PartitionState) []PartitionState {
	out := slices.Clone(states)
	sortPartitions(out)
	return out
}

func compareRefs(x, y PartitionRef) int {
	return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
}
