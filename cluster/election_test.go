package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func TestElectLeader(t *testing.T) {
	p0 := PartitionRef{Topic: "t", Partition: 0}
	base := PartitionState{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3, Revision: 7}
	with := func(change func(*PartitionState)) PartitionState {
		st := base
		change(&st)
		return st
	}
	answers := func(ids map[string]int64) lastLogIDs {
		logs := lastLogIDs{}
		for n, id := range ids {
			logs[n] = map[PartitionRef]int64{p0: id}
		}
		return logs
	}
	for _, tc := range []struct {
		name string
		st   PartitionState
		live []string
		logs lastLogIDs
		want PartitionState
		err  error
	}{{
		name: "the live member with the most data leads",
		st:   base, live: []string{"b", "c"}, logs: answers(map[string]int64{"b": 5, "c": 9}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "c", []string{"b", "c"}, []string{"a"}, 5
		}),
	}, {
		name: "a tie goes to the first in ISR order",
		st:   base, live: []string{"b", "c"}, logs: answers(map[string]int64{"b": 9, "c": 9}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "b", []string{"b", "c"}, []string{"a"}, 5
		}),
	}, {
		name: "an empty partition (LogID 0) still gets a leader",
		st:   base, live: []string{"c"}, logs: answers(map[string]int64{"c": 0}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "c", []string{"c"}, []string{"a", "b"}, 5
		}),
	}, {
		name: "a member that did not answer stays in the ISR but does not lead",
		st:   base, live: []string{"b", "c"}, logs: answers(map[string]int64{"b": 3}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "b", []string{"b", "c"}, []string{"a"}, 5
		}),
	}, {
		name: "an answer about another partition does not count",
		st:   base, live: []string{"b"},
		logs: lastLogIDs{"b": {{Topic: "t", Partition: 1}: 3}},
		err:  errNoAnswered,
	}, {
		name: "no live ISR member",
		st:   base, live: []string{"d"}, logs: answers(map[string]int64{"d": 100}),
		err: errNoLiveISR,
	}, {
		name: "a live node outside the ISR is no candidate",
		st:   base, live: []string{"b", "d"}, logs: answers(map[string]int64{"b": 1, "d": 100}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "b", []string{"b"}, []string{"a", "c"}, 5
		}),
	}, {
		name: "a resigned leader already catching up is not listed twice",
		st: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup = "", []string{"b", "c"}, []string{"a"}
		}),
		live: []string{"a", "b", "c"}, logs: answers(map[string]int64{"a": 20, "b": 9, "c": 5}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "b", []string{"b", "c"}, []string{"a"}, 5
		}),
	}, {
		name: "writes disabled by the old leader are enabled again",
		st: with(func(s *PartitionState) {
			s.WriteDisabled, s.Catchup = true, []string{"d"}
		}),
		live: []string{"b", "c"}, logs: answers(map[string]int64{"b": 5, "c": 2}),
		want: with(func(s *PartitionState) {
			s.Leader, s.ISR, s.Catchup, s.EpochForWrite = "b", []string{"b", "c"}, []string{"d", "a"}, 5
		}),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			live := map[string]bool{}
			for _, n := range tc.live {
				live[n] = true
			}
			before := fmt.Sprintf("%+v", tc.st)
			got, err := electLeader(tc.st, electorate{live: live}, tc.logs)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if after := fmt.Sprintf("%+v", tc.st); after != before {
				t.Fatalf("the state read was changed: %s, was %s", after, before)
			}
			if tc.err != nil {
				return
			}
			// Each election begins a leadership of its own.
			tc.want.LeaderSession = Leadership(tc.want.Leader, tc.want.EpochForWrite)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
			if err := validPartitionState(got); err != nil {
				t.Fatalf("elected an invalid state: %v", err)
			}
		})
	}
}

// Each partition of a batch is decided on its own answers: the same node
// may have the most data of one partition and the least of another.
func TestElectLeadersDecidesEachPartitionOnItsOwn(t *testing.T) {
	ref := func(p int32) PartitionRef { return PartitionRef{Topic: "t", Partition: p} }
	var lost []PartitionState
	for p := range int32(4) {
		lost = append(lost, PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: int64(p), Replicas: 3, Revision: 10})
	}
	lost[3].ISR = []string{"a"}
	logs := lastLogIDs{
		"b": {ref(0): 9, ref(1): 1, ref(2): 4, ref(3): 50},
		"c": {ref(0): 2, ref(1): 8},
	}
	elected, failed := electLeaders(lost, electorate{live: map[string]bool{"b": true, "c": true}}, logs)
	var leaders []string
	for _, st := range elected {
		leaders = append(leaders, fmt.Sprintf("%d:%s@%d", st.Partition, st.Leader, st.EpochForWrite))
	}
	if want := []string{"0:b@1", "1:c@2", "2:b@3"}; !reflect.DeepEqual(leaders, want) {
		t.Fatalf("elected %v, want %v", leaders, want)
	}
	if len(failed) != 1 || failed[0].State.Partition != 3 || !errors.Is(failed[0].Err, errNoLiveISR) {
		t.Fatalf("failed %+v, want partition 3 with no live ISR member", failed)
	}
}

// Candidates holding the same writes tie, and the one leading fewest
// partitions, counting the round's own elections, takes each: a lost
// node's partitions spread over the survivors instead of all going to the
// member listed first. The largest LogID still wins over any count.
func TestElectLeadersSpreadsTiesOverTheCandidates(t *testing.T) {
	var lost []PartitionState
	logs := lastLogIDs{"b": {}, "c": {}}
	for p := range int32(10) {
		st := PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3, Revision: 10}
		lost = append(lost, st)
		logs["b"][st.Ref()], logs["c"][st.Ref()] = 7, 7
	}
	logs["b"][lost[9].Ref()] = 8 // b alone holds partition 9's last write
	leads := map[string]int{"b": 3, "c": 1}
	got := leadersElected(t, lost, electorate{live: map[string]bool{"b": true, "c": true}, leads: leads}, logs)
	// c catches up with b's three (c, c), then they alternate from ISR
	// order, and b takes 9 for its data whatever it leads.
	if want := "ccbcbcbcbb"; got != want {
		t.Fatalf("leaders in partition order %s, want %s", got, want)
	}
	if leads["b"] != 3+5 || leads["c"] != 1+5 {
		t.Fatalf("leads after the round %v, want b 8 and c 6", leads)
	}
}

// A stopping node that holds no more than another member is passed over,
// whatever either leads: its leadership would move off it again within
// the second. With the longest log it still leads, since no other member
// could without losing writes.
func TestElectionPassesOverAStoppingNodeUnlessItAloneHoldsTheWrites(t *testing.T) {
	live := map[string]NodeInfo{"b": {ID: "b", Leaving: true}, "c": {ID: "c"}, "d": {ID: "d"}}
	var lost []PartitionState
	logs := lastLogIDs{"b": {}, "c": {}, "d": {}}
	for p := range int32(3) {
		st := PartitionState{Topic: "t", Partition: p, Leader: "a", ISR: []string{"a", "b", "c", "d"}, Replicas: 4, Revision: 10}
		lost = append(lost, st)
		logs["b"][st.Ref()], logs["c"][st.Ref()], logs["d"][st.Ref()] = 7, 7, 6
	}
	logs["b"][lost[2].Ref()] = 8 // b alone holds partition 2's last write
	// b leads nothing and c leads the most: without the leaving mark b
	// would take the ties.
	got := leadersElected(t, lost, electorateOf(live, map[string]int{"c": 5}), logs)
	if want := "ccb"; got != want {
		t.Fatalf("leaders in partition order %s, want %s", got, want)
	}
	live["b"] = NodeInfo{ID: "b"}
	if st, _ := electLeader(lost[0], electorateOf(live, map[string]int{"c": 5}), logs); st.Leader != "b" {
		t.Fatalf("a node that is not stopping and leads the fewest of the tied: %s elected, want b", st.Leader)
	}
}

// leadersElected runs one round of elections over lost, which must all
// succeed, and lists their leaders in partition order, one letter each.
func leadersElected(t *testing.T, lost []PartitionState, e electorate, logs lastLogIDs) string {
	t.Helper()
	elected, failed := electLeaders(lost, e, logs)
	if len(failed) != 0 {
		t.Fatalf("failed %+v", failed)
	}
	got := ""
	for _, st := range elected {
		got += st.Leader
	}
	return got
}

func TestNeedsLeader(t *testing.T) {
	live := map[string]bool{"b": true}
	for _, tc := range []struct {
		st   PartitionState
		want bool
	}{
		{PartitionState{Leader: "b", ISR: []string{"b"}}, false},
		{PartitionState{Leader: "a", ISR: []string{"a", "b"}}, true},
		{PartitionState{ISR: []string{"a", "b"}}, true}, // resigned
		{PartitionState{}, false},                       // never placed
	} {
		if got := needsLeader(tc.st, live); got != tc.want {
			t.Errorf("needsLeader(%+v) = %v, want %v", tc.st, got, tc.want)
		}
	}
}

// The controller's view follows the watch: a state replaces the one it
// holds, and a deletion, which comes without a revision, removes it.
func TestPartitionViewFollowsTheWatch(t *testing.T) {
	v := partitionView{}
	v.apply(PartitionState{Topic: "b", Partition: 0, Leader: "n1", Revision: 3})
	v.apply(PartitionState{Topic: "a", Partition: 1, Leader: "n1", Revision: 4})
	v.apply(PartitionState{Topic: "a", Partition: 1, Leader: "n2", Revision: 9})
	v.apply(PartitionState{Topic: "a", Partition: 1, Leader: "n3", Revision: 5}) // older: a list seen late
	got := v.states()
	sortPartitions(got)
	if len(got) != 2 || got[0].Topic != "a" || got[0].Leader != "n2" || got[1].Topic != "b" {
		t.Fatalf("view %+v", got)
	}
	v.apply(PartitionState{Topic: "b", Partition: 0})
	if got := v.states(); len(got) != 1 || got[0].Topic != "a" {
		t.Fatalf("after the deletion: %+v", got)
	}
}
