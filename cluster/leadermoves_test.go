package cluster

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
)

func moveState(p int32, leader string, isr, catchup []string, preferred string) PartitionState {
	return PartitionState{Topic: "t", Partition: p, Leader: leader, ISR: isr, Catchup: catchup, EpochForWrite: 7,
		Replicas: int32(len(isr) + len(catchup)), Preferred: preferred, Revision: 3}
}

func liveNodesOf(ids ...string) map[string]bool {
	live := map[string]bool{}
	for _, id := range ids {
		live[id] = true
	}
	return live
}

func nodesOf(ids ...string) []NodeInfo {
	var live []NodeInfo
	for _, id := range ids {
		live = append(live, NodeInfo{ID: id})
	}
	return live
}

// describeMoves is each move as "partition:from>to@epoch reason".
func describeMoves(moves []leaderMove) []string {
	var out []string
	for _, m := range moves {
		out = append(out, fmt.Sprintf("%d:%s>%s@%d %s", m.Next.Partition, m.From, m.Next.Leader, m.Next.EpochForWrite, m.Reason))
	}
	return out
}

// A planned move keeps the ISR and catch-up list, makes the old leader a
// follower in the ISR, increments EpochForWrite and enables writes; it is
// refused unless the leader is live and the target a live ISR member other
// than the leader.
func TestHandOver(t *testing.T) {
	live := liveNodesOf("a", "b", "c", "d")
	st := moveState(0, "a", []string{"a", "b", "c"}, []string{"d"}, "a")
	st.WriteDisabled = true
	next, err := handOver(st, "b", live)
	if err != nil {
		t.Fatal(err)
	}
	if next.Leader != "b" || !slices.Equal(next.ISR, st.ISR) || !slices.Equal(next.Catchup, st.Catchup) ||
		next.EpochForWrite != 8 || next.LeaderSession != "b@8" || next.WriteDisabled || next.Preferred != "a" || next.Revision != st.Revision {
		t.Fatalf("handed over: %+v", next)
	}
	if err := validPartitionState(next); err != nil {
		t.Fatal(err)
	}
	next.ISR[0] = "x"
	if st.ISR[0] != "a" {
		t.Fatal("the next state shares the ISR of the state read")
	}
	for _, c := range []struct {
		st   PartitionState
		to   string
		want error
	}{
		{st, "d", ErrTargetNotInISR},
		{st, "a", ErrAlreadyLeader},
		{st, "z", ErrTargetNotInISR},
		{moveState(0, "a", []string{"a", "e"}, nil, ""), "e", ErrTargetNotLive},
		{moveState(0, "e", []string{"e", "a"}, nil, ""), "a", ErrNoLiveLeader},
		{moveState(0, "", []string{"a", "b"}, nil, ""), "a", ErrNoLiveLeader},
	} {
		if _, err := handOver(c.st, c.to, live); !errors.Is(err, c.want) {
			t.Errorf("%s to %s: %v, want %v", c.st.Leader, c.to, err, c.want)
		}
	}
}

// Without a named target the preferred replica leads if it may; else the
// live ISR member leading the fewest partitions, the first in ISR order on
// a tie. Nodes to avoid, dead ones and those catching up never lead.
func TestPickLeader(t *testing.T) {
	live := liveNodesOf("a", "b", "c", "d")
	leads := map[string]int{"a": 5, "b": 3, "c": 1}
	for _, c := range []struct {
		st    PartitionState
		avoid map[string]bool
		want  string
	}{
		{moveState(0, "a", []string{"a", "b", "c"}, nil, "b"), nil, "b"},
		{moveState(0, "a", []string{"a", "b", "c"}, nil, "a"), nil, "c"},
		{moveState(0, "a", []string{"a", "b", "c"}, []string{"d"}, "d"), nil, "c"},
		{moveState(0, "a", []string{"a", "b", "c"}, nil, "b"), liveNodesOf("b"), "c"},
		{moveState(0, "a", []string{"a", "b", "e"}, nil, "e"), nil, "b"},
		{moveState(0, "a", []string{"a", "d", "c"}, nil, ""), nil, "d"},
		{moveState(0, "a", []string{"a", "e"}, []string{"b"}, ""), nil, ""},
	} {
		if got := pickLeader(c.st, live, leads, c.avoid); got != c.want {
			t.Errorf("ISR %v preferred %q avoiding %v: %q, want %q", c.st.ISR, c.st.Preferred, c.avoid, got, c.want)
		}
	}
}

// An ask is carried out only while its partition is led by the node it
// was asked from: one seen again after it was carried out, or overtaken
// by an election, changes nothing. Asks without a target spread over the
// nodes leading the fewest, counting what the same round moved.
func TestPlanAskedMoves(t *testing.T) {
	live := liveNodesOf("a", "b", "c")
	states := map[PartitionRef]PartitionState{}
	for _, st := range []PartitionState{
		moveState(0, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(1, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(2, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(3, "b", []string{"b", "a"}, []string{"c"}, "b"),
		moveState(4, "c", []string{"c", "a"}, nil, "c"),
	} {
		states[st.Ref()] = st
	}
	ask := func(p int32, from, to string) LeaderMoveAsk {
		return LeaderMoveAsk{Ref: PartitionRef{"t", p}, From: from, To: to, Revision: 10 + int64(p)}
	}
	moves, refused := planAskedMoves([]LeaderMoveAsk{
		ask(9, "a", "b"), // no such partition
		ask(2, "a", ""),
		ask(0, "a", ""),
		ask(1, "b", "c"), // b never led it: already moved, or an election
		ask(3, "b", "c"), // c is catching up
		ask(4, "c", "a"),
	}, states, live)
	// Leaderships before: a 3, b 1, c 1. Partition 0 goes to b (tie with c,
	// first in ISR order), which then leads 2, so partition 2 goes to c.
	want := []string{"0:a>b@8 asked", "2:a>c@8 asked", "4:c>a@8 asked"}
	if got := describeMoves(moves); !reflect.DeepEqual(got, want) {
		t.Errorf("moves %v, want %v", got, want)
	}
	var why []string
	for _, r := range refused {
		why = append(why, fmt.Sprintf("%d:%v", r.Ask.Ref.Partition, r.Err))
	}
	for i, want := range []error{ErrLeaderMoved, ErrTargetNotInISR, ErrPartitionNotFound} {
		if i >= len(refused) || !errors.Is(refused[i].Err, want) {
			t.Errorf("refused %v, want partitions 1, 3 and 9 refused for %v", why, []error{ErrLeaderMoved, ErrTargetNotInISR, ErrPartitionNotFound})
			break
		}
	}
}

// The balance gives leadership back to the preferred replica where it is
// live, in the ISR and not avoided, while the leader is live and takes
// writes; at most limit partitions a round, in partition order.
func TestPlanLeaderBalance(t *testing.T) {
	live := liveNodesOf("a", "b", "c", "d")
	disabled := moveState(6, "a", []string{"a", "b"}, nil, "b")
	disabled.WriteDisabled = true
	states := []PartitionState{
		moveState(7, "a", []string{"a", "c"}, nil, "c"),
		moveState(0, "a", []string{"a", "b", "c"}, nil, "b"),
		moveState(1, "b", []string{"b", "a"}, nil, "b"),           // leads already
		moveState(2, "a", []string{"a", "b"}, []string{"c"}, "c"), // catching up
		moveState(3, "a", []string{"a", "e"}, nil, "e"),           // not live
		moveState(4, "e", []string{"e", "b"}, nil, "b"),           // failover first
		moveState(5, "a", []string{"a", "b"}, nil, ""),            // none preferred
		disabled,
		moveState(8, "a", []string{"a", "d"}, nil, "d"), // avoided
		moveState(9, "c", []string{"c", "b"}, nil, "b"),
	}
	got := describeMoves(planLeaderBalance(states, live, liveNodesOf("d"), 10))
	want := []string{"0:a>b@8 balance", "7:a>c@8 balance", "9:c>b@8 balance"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("moves %v, want %v", got, want)
	}
	if got := describeMoves(planLeaderBalance(states, live, nil, 2)); !reflect.DeepEqual(got, want[:2]) {
		t.Fatalf("limited to 2: %v, want %v", got, want[:2])
	}
}

// Draining a node's leaderships moves each to another live ISR member,
// preferred replica first, else spread over the nodes leading the fewest;
// a partition with no other live member keeps its leader and is reported.
func TestPlanLeadersOff(t *testing.T) {
	live := nodesOf("a", "b", "c")
	states := []PartitionState{
		moveState(0, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(1, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(2, "a", []string{"a", "b", "c"}, nil, "c"),
		moveState(3, "a", []string{"a", "x"}, []string{"b"}, "a"),
		moveState(4, "b", []string{"b", "a"}, nil, "a"),
		moveState(5, "a", []string{"a", "b", "c"}, nil, "a"),
	}
	moves, stuck := planLeadersOff(states, live, liveNodesOf("a"))
	// Before: a 5, b 1. 0 goes to c (none), 1 to b (tie, ISR order), 2 to c
	// (preferred), 5 to b (b 2, c 2: ISR order).
	want := []string{"0:a>c@8 drain", "1:a>b@8 drain", "2:a>c@8 drain", "5:a>b@8 drain"}
	if got := describeMoves(moves); !reflect.DeepEqual(got, want) {
		t.Fatalf("moves %v, want %v", got, want)
	}
	if !reflect.DeepEqual(stuck, []PartitionRef{{"t", 3}}) {
		t.Fatalf("stuck %v, want only partition 3", stuck)
	}
}

// A move off a stopping node counts as leaving, one off a drained node as
// a drain, whichever other nodes are off.
func TestPlanLeadersOffNamesEachNodesReason(t *testing.T) {
	live := nodesOf("a", "b", "c")
	live[1].Leaving = true // b
	states := []PartitionState{
		moveState(0, "a", []string{"a", "b", "c"}, nil, "a"),
		moveState(1, "b", []string{"b", "c", "a"}, nil, "b"),
	}
	moves, stuck := planLeadersOff(states, live, liveNodesOf("a", "b"))
	want := []string{"0:a>c@8 drain", "1:b>c@8 leaving"}
	if got := describeMoves(moves); !reflect.DeepEqual(got, want) || len(stuck) != 0 {
		t.Fatalf("moves %v, stuck %v, want %v", got, stuck, want)
	}
}

// The outcome an asker reads from the state after the controller decided.
func TestMoveOutcome(t *testing.T) {
	ask := LeaderMoveAsk{Ref: PartitionRef{"t", 0}, From: "a", To: "b"}
	for _, c := range []struct {
		leader, to string
		want       error
	}{
		{"b", "b", nil},
		{"c", "", nil},
		{"a", "b", ErrMoveRefused},
		{"c", "b", ErrLeaderMoved},
	} {
		ask.To = c.to
		if err := moveOutcome(ask, PartitionState{Leader: c.leader}); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("leader %s after a move to %q: %v, want %v", c.leader, c.to, err, c.want)
		}
	}
}

// A repair that replaces a partition's preferred replica makes the new node
// preferred, so the leaderships the lost node was to hold go to it.
func TestRepairPassesOnThePreferredReplica(t *testing.T) {
	live := []NodeInfo{testNode("b"), testNode("c"), testNode("d")}
	plans := planRepairs([]PartitionState{
		moveState(0, "b", []string{"a", "b", "c"}, nil, "a"),
		moveState(1, "b", []string{"b", "a"}, nil, "b"),
	}, live, nil, map[string]bool{"a": true})
	if len(plans) != 2 || plans[0].Next.Preferred != "d" || plans[1].Next.Preferred != "b" {
		t.Fatalf("plans %+v, want partition 0 preferring d, partition 1 still b", plans)
	}
}

// The watch may show a request again after the controller decided and
// deleted it; the controller's queue leaves it out, but takes a newer
// request of the same partition.
func TestAskQueueLeavesOutDecidedRequests(t *testing.T) {
	a5 := LeaderMoveAsk{Ref: PartitionRef{"t", 0}, From: "a", Revision: 5}
	b6 := LeaderMoveAsk{Ref: PartitionRef{"t", 1}, From: "a", Revision: 6}
	a9 := LeaderMoveAsk{Ref: PartitionRef{"t", 0}, From: "b", Revision: 9}
	q := newAskQueue()
	q.seen([]LeaderMoveAsk{a5, b6})
	if len(q.pending) != 2 {
		t.Fatalf("pending %v, want both", q.pending)
	}
	q.decide(a5)
	if q.seen([]LeaderMoveAsk{a5, b6}); !reflect.DeepEqual(q.pending, []LeaderMoveAsk{b6}) {
		t.Fatalf("pending %v after deciding a5, want only b6", q.pending)
	}
	if q.seen([]LeaderMoveAsk{b6, a9}); !reflect.DeepEqual(q.pending, []LeaderMoveAsk{b6, a9}) {
		t.Fatalf("pending %v, want b6 and the newer a9", q.pending)
	}
}

// Drained nodes, and nodes a move removes, take no leadership off a node
// being drained: it goes to a node that stays.
func TestLeadersOffGoToNodesThatStay(t *testing.T) {
	live := nodesOf("a", "b", "c", "e")
	moving := moveState(1, "a", []string{"a", "c", "b"}, nil, "c")
	moving.Move = Move{Add: []string{"d"}, Remove: []string{"c"}}
	states := []PartitionState{
		moveState(0, "a", []string{"a", "e", "b"}, nil, "e"), // e drained too
		moving,
		moveState(2, "e", []string{"e", "a", "c"}, nil, "a"),
		moveState(3, "e", []string{"e", "a"}, nil, "a"), // stuck: a drained
	}
	moves, stuck := planLeadersOff(states, live, liveNodesOf("a", "e"))
	want := []string{"0:a>b@8 drain", "1:a>b@8 drain", "2:e>c@8 drain"}
	if got := describeMoves(moves); !reflect.DeepEqual(got, want) {
		t.Fatalf("moves %v, want %v", got, want)
	}
	if !reflect.DeepEqual(stuck, []PartitionRef{{"t", 3}}) {
		t.Fatalf("stuck %v, want partition 3", stuck)
	}
	if moves[1].Next.Move.Remove[0] != "c" {
		t.Fatalf("the leader move dropped the replica move: %+v", moves[1].Next)
	}
}

// A move that removes its leader's replica hands leadership over as a
// leader move does: to the preferred replica if it stays, else the live
// member that stays leading the fewest, never a dead or removed one, in
// the next epoch, with the ISR kept.
func TestMoveHandOffIsALeaderMove(t *testing.T) {
	live := liveOf("a", "c", "d", "e")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b", "c", "d", "e"}, EpochForWrite: 4, Replicas: 5, Revision: 1,
		Move: Move{Remove: []string{"a", "c"}}}
	for _, c := range []struct {
		preferred string
		leads     map[string]int
		want      string
	}{
		{"", map[string]int{}, "d"},                // b is dead, c removed
		{"", map[string]int{"d": 3, "e": 1}, "e"},  // e leads fewer
		{"e", map[string]int{"e": 9}, "e"},         // preferred
		{"c", map[string]int{"d": 1, "e": 2}, "d"}, // preferred, but removed
		{"b", map[string]int{"d": 5, "e": 5}, "d"}, // preferred, but dead
	} {
		st.Preferred = c.preferred
		direct, _ := leaderOff(st, live, maps.Clone(c.leads), nil)
		before := c.leads[c.want]
		next := step(t, st, live, MoveHandingOff, c.leads)
		if next.Leader != c.want || next.EpochForWrite != 5 || len(next.ISR) != 5 || !reflect.DeepEqual(next, direct) {
			t.Errorf("preferred %q: %s, want %s leading in epoch 5, as a drain's leader move", c.preferred, describe(next), c.want)
		}
		if c.leads[c.want] != before+1 {
			t.Errorf("preferred %q: the hand-off was not counted in %v", c.preferred, c.leads)
		}
	}
	st.ISR = []string{"a", "b", "c"}
	step(t, st, live, MoveWaiting, map[string]int{}) // no live member that stays
}
