package cluster

import (
	"errors"
	"slices"
)

// lastLogIDs is what the candidates answered: by node, the last committed
// LogID of each partition asked about. A partition absent from a node's
// answers went unanswered (the node does not hold it, or was too slow).
type lastLogIDs map[string]map[PartitionRef]int64

func (l lastLogIDs) of(node string, p PartitionRef) (int64, bool) {
	id, ok := l[node][p]
	return id, ok
}

var (
	errNoLiveISR  = errors.New("no live ISR member to lead it")
	errNoAnswered = errors.New("no live ISR member told its last LogID")
)

// unelected is a partition that needed a leader and could not get one.
type unelected struct {
	State PartitionState
	Err   error
}

// electorate is what an election knows of the nodes besides their logs:
// which are live, which of those are stopping (NodeInfo.Leaving), and how
// many partitions each leads, which the round's own elections add to.
type electorate struct {
	live    map[string]bool
	leaving map[string]bool
	leads   map[string]int
}

// electorateOf is the electorate of the registered nodes live, leading
// leads (nil: none known).
func electorateOf(live map[string]NodeInfo, leads map[string]int) electorate {
	e := electorate{live: liveSet(live), leaving: map[string]bool{}, leads: leads}
	for id, n := range live {
		if n.Leaving {
			e.leaving[id] = true
		}
	}
	return e
}

// electLeaders decides the next state of every partition in lost, each of
// which needs a leader. It does no I/O, so the caller gathers logs first
// and stores the result after.
func electLeaders(lost []PartitionState, e electorate, logs lastLogIDs) (elected []PartitionState, failed []unelected) {
	if e.leads == nil {
		e.leads = map[string]int{}
	}
	for _, st := range lost {
		next, err := electLeader(st, e, logs)
		if err != nil {
			failed = append(failed, unelected{State: st, Err: err})
			continue
		}
		e.leads[next.Leader]++
		elected = append(elected, next)
	}
	return elected, failed
}

// electLeader makes the live ISR member with the largest last LogID the
// leader, since it holds every write the others hold. Members that tie
// hold the same writes: one that is not stopping takes it before one that
// is, whose leadership would only move again within the second, then the
// one leading the fewest partitions (e.leads), the first in ISR order
// after that. A lost node's partitions then spread over the survivors that
// follow them, rather than all going to whichever node placement put
// second, which would carry the takeover, their writes and the forwards to
// them alone. A stopping node still wins with the longest log: no other
// could lead without losing writes. The ISR keeps only the live members,
// the dead ones move to catch-up, and EpochForWrite grows so no member
// takes a write made under the old leader. Writes are enabled again: the
// new leader has not failed one.
func electLeader(st PartitionState, e electorate, logs lastLogIDs) (PartitionState, error) {
	candidates := slices.DeleteFunc(slices.Clone(st.ISR), func(n string) bool { return !e.live[n] })
	if len(candidates) == 0 {
		return st, errNoLiveISR
	}
	best, bestID := "", int64(-1)
	for _, n := range candidates {
		id, ok := logs.of(n, st.Ref())
		if ok && (id > bestID || id == bestID && e.before(n, best)) {
			best, bestID = n, id
		}
	}
	if best == "" {
		return st, errNoAnswered
	}
	next := st
	next.Leader = best
	next.ISR = candidates
	next.Catchup = slices.Clone(st.Catchup)
	for _, n := range st.ISR {
		if !e.live[n] && !slices.Contains(next.Catchup, n) {
			next.Catchup = append(next.Catchup, n)
		}
	}
	next.EpochForWrite++
	next.LeaderSession = Leadership(best, next.EpochForWrite)
	next.WriteDisabled = false
	return next, nil
}

// before reports whether n should lead rather than m when both hold the
// same writes.
func (e electorate) before(n, m string) bool {
	if e.leaving[n] != e.leaving[m] {
		return !e.leaving[n]
	}
	return e.leads[n] < e.leads[m]
}

// needsLeader reports whether st's leader is gone: it names a node not live,
// or none while the partition has an ISR (its leader resigned). A partition
// with neither has never been placed.
func needsLeader(st PartitionState, live map[string]bool) bool {
	if st.Leader == "" {
		return len(st.ISR) > 0
	}
	return !live[st.Leader]
}
