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

// electLeaders decides the next state of every partition in lost, each of
// which needs a leader; live holds the IDs of the registered nodes. It does
// no I/O, so the caller gathers logs first and stores the result after.
func electLeaders(lost []PartitionState, live map[string]bool, logs lastLogIDs) (elected []PartitionState, failed []unelected) {
	for _, st := range lost {
		next, err := electLeader(st, live, logs)
		if err != nil {
			failed = append(failed, unelected{State: st, Err: err})
			continue
		}
		elected = append(elected, next)
	}
	return elected, failed
}

// electLeader makes the live ISR member with the largest last LogID the
// leader, the first in ISR order on a tie, since it holds every write the
// others hold. The ISR keeps only the live members, the dead ones move to
// catch-up, and EpochForWrite grows so no member takes a write made under
// the old leader. Writes are enabled again: the new leader has not failed
// one.
func electLeader(st PartitionState, live map[string]bool, logs lastLogIDs) (PartitionState, error) {
	candidates := slices.DeleteFunc(slices.Clone(st.ISR), func(n string) bool { return !live[n] })
	if len(candidates) == 0 {
		return st, errNoLiveISR
	}
	best, bestID := "", int64(-1)
	for _, n := range candidates {
		if id, ok := logs.of(n, st.Ref()); ok && id > bestID {
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
		if !live[n] && !slices.Contains(next.Catchup, n) {
			next.Catchup = append(next.Catchup, n)
		}
	}
	next.EpochForWrite++
	next.LeaderSession = Leadership(best, next.EpochForWrite)
	next.WriteDisabled = false
	return next, nil
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
