package cluster

import (
	"iter"
	"time"
)

// lapses tells a dead leader from a live one whose registration lapsed.
//
// A lease lapses when etcd hears no renewal for a TTL, and on a machine
// saturated by load that happens to nodes that are alive and serving: the
// node registers again a moment later. Failing its partitions over in
// between moves thousands of leaderships, each new leader starting cold
// and each old one catching up, at the moment the machine has the least
// to spare. So a missing registration is proof of death only together
// with silence: while this node's replication session to the lapsed node
// is up, the node answered within the session's down-after and keeps
// leading, for at most grace; after that, or once the session breaks or
// goes silent, its partitions fail over. A frozen node's sessions go
// silent within down-after, sooner than its lease lapses, and a killed
// node's break at once, so neither waits for the grace.
type lapses struct {
	grace time.Duration
	// of each leader seen unregistered this term; a node registered
	// again is forgotten.
	of map[string]*lapse
}

type lapse struct {
	since time.Time // first seen unregistered
	told  bool      // reported spared
}

func newLapses(grace time.Duration) *lapses {
	return &lapses{grace: grace, of: map[string]*lapse{}}
}

// Spared is an unregistered leader whose partitions keep it: Until is when
// its grace ends.
type Spared struct {
	Node  string
	Until time.Time
}

// spare returns the leaders of states that are not registered but still
// keep their partitions at now: heard (this node's session to them is up)
// and unregistered for less than grace. newly lists those spared for the
// first time in their lapse, for the log. Leaders registered again, or
// leading nothing any more, are forgotten.
func (l *lapses) spare(states iter.Seq[PartitionState], registered map[string]bool, heard func(string) bool, now time.Time) (spared map[string]bool, newly []Spared) {
	unregistered := map[string]bool{}
	for st := range states {
		if st.Leader != "" && !registered[st.Leader] {
			unregistered[st.Leader] = true
		}
	}
	for n := range l.of {
		if !unregistered[n] {
			delete(l.of, n)
		}
	}
	spared = map[string]bool{}
	for n := range unregistered {
		lp := l.of[n]
		if lp == nil {
			lp = &lapse{since: now}
			l.of[n] = lp
		}
		if l.grace <= 0 || now.Sub(lp.since) >= l.grace || heard == nil || !heard(n) {
			continue
		}
		spared[n] = true
		if !lp.told {
			lp.told = true
			newly = append(newly, Spared{Node: n, Until: lp.since.Add(l.grace)})
		}
	}
	return spared, newly
}
