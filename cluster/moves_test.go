package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func liveOf(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// joined is what the leader's isr-join stores for a caught-up replica.
func joined(st PartitionState, n string) PartitionState {
	st.Catchup = without(st.Catchup, n)
	st.ISR = append(slices.Clone(st.ISR), n)
	st.EpochForWrite++
	return st
}

func describe(st PartitionState) string {
	return fmt.Sprintf("L=%s isr=%v cu=%v r=%d e=%d move=%v", st.Leader, st.ISR, st.Catchup, st.Replicas, st.EpochForWrite, st.Move)
}

// step plans and checks that what is planned could be stored.
func step(t *testing.T, st PartitionState, live map[string]bool, want MoveStep, leads ...map[string]int) PartitionState {
	t.Helper()
	counted := map[string]int{}
	if len(leads) > 0 {
		counted = leads[0]
	}
	next, got := planMove(st, live, counted)
	if got != want {
		t.Fatalf("from %s: step %v, want %v", describe(st), got, want)
	}
	if err := validPartitionState(next); err != nil {
		t.Fatalf("planned an invalid state %s: %v", describe(next), err)
	}
	return next
}

// A move adds the target, waits until it joined the ISR, and only then
// removes the source: the ISR never has fewer members than before.
func TestMoveAddsTheTargetBeforeRemovingTheSource(t *testing.T) {
	live := liveOf("a", "b", "c", "d")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3, Revision: 1}
	st, err := requestMove(st, Move{Add: []string{"d"}, Remove: []string{"b"}}, live)
	if err != nil {
		t.Fatal(err)
	}
	st = step(t, st, live, MoveAdding)
	if !slices.Equal(st.Catchup, []string{"d"}) || len(st.ISR) != 3 {
		t.Fatalf("after adding: %s", describe(st))
	}
	step(t, st, live, MoveWaiting) // d catching up
	st = joined(st, "d")
	st = step(t, st, live, MoveRemoving)
	if describe(st) != "L=a isr=[a c d] cu=[] r=3 e=5 move={[] []}" {
		t.Fatalf("after removing: %s", describe(st))
	}
	step(t, st, live, MoveWaiting)
}

// A source that leads hands leadership to an in-sync replica, in a new
// epoch, before it leaves.
func TestMoveOffTheLeaderHandsLeadershipFirst(t *testing.T) {
	live := liveOf("a", "b", "c", "d")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3, Revision: 1,
		Move: Move{Add: []string{"d"}, Remove: []string{"a"}}}
	st = joined(step(t, st, live, MoveAdding), "d")
	st = step(t, st, live, MoveHandingOff)
	if st.Leader != "b" || st.EpochForWrite != 6 || !slices.Contains(st.ISR, "a") {
		t.Fatalf("after the hand-off: %s", describe(st))
	}
	st = step(t, st, live, MoveRemoving)
	if describe(st) != "L=b isr=[b c d] cu=[] r=3 e=6 move={[] []}" {
		t.Fatalf("after removing: %s", describe(st))
	}
}

// A target that dies before a move with a source ends is taken out again
// and the source stays, whatever step the move had reached; a partition
// without a live leader waits for failover.
func TestMoveWhoseTargetDiesIsRolledBack(t *testing.T) {
	all := liveOf("a", "b", "c", "d")
	noD := liveOf("a", "b", "c")
	start := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3, Revision: 1,
		Move: Move{Add: []string{"d"}, Remove: []string{"a"}}}
	catching := step(t, start, all, MoveAdding)
	inSync := joined(catching, "d")
	handed := step(t, inSync, all, MoveHandingOff)
	handed.Leader = "b" // d did not lead: b was first
	for _, st := range []PartitionState{start, catching, inSync, handed} {
		back := step(t, st, noD, MoveRolledBack)
		if slices.Contains(back.ISR, "d") || slices.Contains(back.Catchup, "d") || back.Move.Active() || !slices.Contains(back.ISR, "a") {
			t.Fatalf("rolled back from %s to %s", describe(st), describe(back))
		}
	}
	leaderless := inSync
	leaderless.Leader = "d"
	step(t, leaderless, noD, MoveWaiting)
}

// A move that only adds, as a raised replica count makes, is not rolled
// back when its target dies: the partition would stay short of its count.
// It waits, and goes on once the target is back; repair puts a target gone
// for good elsewhere and the move goes on with that node.
func TestMoveThatOnlyAddsWaitsForItsTarget(t *testing.T) {
	all := liveOf("a", "b", "c", "d")
	noC := liveOf("a", "b", "d")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b"}, EpochForWrite: 4, Replicas: 2, Revision: 1,
		Move: Move{Add: []string{"c"}}}
	catching := step(t, st, all, MoveAdding)
	for _, dead := range []PartitionState{st, catching, joined(catching, "c")} {
		if got := step(t, dead, noC, MoveWaiting); got.Move.Add[0] != "c" {
			t.Fatalf("from %s with c dead: %s", describe(dead), describe(got))
		}
	}
	done := step(t, joined(catching, "c"), all, MoveRemoving)
	if done.Replicas != 3 || done.Move.Active() {
		t.Fatalf("after c joined: %s, want three replicas and the move over", describe(done))
	}

	nodes := []NodeInfo{testNode("a"), testNode("b"), testNode("d")}
	plans := planRepairs([]PartitionState{catching}, nodes, nil, map[string]bool{"c": true})
	if len(plans) != 1 {
		t.Fatalf("repair of gone c planned %d partitions", len(plans))
	}
	moved := plans[0].Next
	if !slices.Equal(moved.Move.Add, []string{"d"}) || !slices.Equal(moved.Catchup, []string{"d"}) {
		t.Fatalf("repair of the gone target: %s, want the move to go on with d", describe(moved))
	}
	done = step(t, joined(moved, "d"), noC, MoveRemoving)
	if done.Replicas != 3 || !slices.Equal(done.ISR, []string{"a", "b", "d"}) {
		t.Fatalf("after d joined: %s", describe(done))
	}
}

// Removing waits while the ISR left would not be a majority.
func TestMoveRemovesOnlyWhenTheISRKeepsAMajority(t *testing.T) {
	live := liveOf("a", "b", "c", "d")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "d"}, Catchup: []string{"c"}, EpochForWrite: 4, Replicas: 3, Revision: 1,
		Move: Move{Add: []string{"d"}, Remove: []string{"a"}}}
	st = step(t, st, live, MoveHandingOff)
	step(t, st, live, MoveWaiting) // [d] alone of [c d] is no majority
	st = joined(st, "c")
	step(t, st, live, MoveRemoving)
}

func TestRequestMoveRefusesBadMoves(t *testing.T) {
	live := liveOf("a", "b", "c", "d")
	st := PartitionState{Topic: "t", Leader: "a", ISR: []string{"a", "b"}, Catchup: []string{"c"}, Replicas: 3, Revision: 1}
	for _, m := range []Move{
		{},
		{Add: []string{"b"}},    // holds it
		{Add: []string{"e"}},    // not live
		{Remove: []string{"d"}}, // does not hold it
		{Add: []string{"d"}, Remove: []string{"d"}},
		{Remove: []string{"a", "b", "c"}}, // nothing left
	} {
		if _, err := requestMove(st, m, live); !errors.Is(err, ErrBadMove) {
			t.Errorf("move %v: %v, want ErrBadMove", m, err)
		}
	}
	moving, err := requestMove(st, Move{Add: []string{"d"}, Remove: []string{"c"}}, live)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := requestMove(moving, Move{Add: []string{"d"}}, live); !errors.Is(err, ErrMoveInProgress) {
		t.Fatalf("second move: %v", err)
	}
}

// Going from one replica to three adds two as catch-up replicas while the
// partition still counts one, so its leader keeps its majority and takes
// writes; the count becomes three once both are in sync. Back to one, the
// followers leave, never the leader.
func TestReplicaCountUpAndDown(t *testing.T) {
	nodes := []NodeInfo{testNode("a"), testNode("b"), testNode("c"), testNode("d")}
	live := nodeIDs(nodes)
	states := []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a"}, Replicas: 1, Revision: 1},
		{Topic: "t", Partition: 1, Leader: "b", ISR: []string{"b"}, Replicas: 1, Revision: 1},
		{Topic: "u", Partition: 0, Leader: "c", ISR: []string{"c", "a"}, Replicas: 2, Revision: 1},
	}
	up, err := replicaCountMoves(states, "t", 3, nodes)
	if err != nil || len(up) != 2 {
		t.Fatalf("planned %v, %v", up, err)
	}
	// Load a 2, b 1, c 1, d 0, counting each replica planned: the least
	// loaded first, by ID on a tie.
	if got := fmt.Sprint(up[0].Move.Add, up[1].Move.Add); got != "[d b] [c d]" {
		t.Fatalf("added %s", got)
	}
	st := step(t, up[0], live, MoveAdding)
	if st.Replicas != 1 {
		t.Fatalf("count raised before the replicas are in sync: %s", describe(st))
	}
	st = joined(joined(st, "d"), "b")
	st = step(t, st, live, MoveRemoving)
	if describe(st) != "L=a isr=[a d b] cu=[] r=3 e=2 move={[] []}" {
		t.Fatalf("at three: %s", describe(st))
	}
	if again, err := replicaCountMoves([]PartitionState{up[0]}, "t", 3, nodes); err != nil || len(again) != 0 {
		t.Fatalf("asking again: %v, %v", again, err)
	}
	down, err := replicaCountMoves([]PartitionState{st}, "t", 1, nodes)
	if err != nil || len(down) != 1 || fmt.Sprint(down[0].Move) != "{[] [b d]}" {
		t.Fatalf("planned %v, %v", down, err)
	}
	st = step(t, down[0], live, MoveRemoving)
	if describe(st) != "L=a isr=[a] cu=[] r=1 e=2 move={[] []}" {
		t.Fatalf("at one: %s", describe(st))
	}
	if _, err := replicaCountMoves(states, "t", 5, nodes); !errors.Is(err, ErrBadMove) {
		t.Fatalf("more replicas than nodes: %v", err)
	}
	if _, err := replicaCountMoves(up, "t", 2, nodes); !errors.Is(err, ErrMoveInProgress) {
		t.Fatalf("while moving to another count: %v", err)
	}
}

// A raised replica count whose new replica's node died waits for it
// (planMove); asked for again, a count is planned from the replicas the
// partition has instead of refused until the node comes back: the
// stranded target leaves the catch-up list, and a live node is added if
// the count still wants one. A target that joined the ISR before dying
// stays.
func TestReplicaCountAskedAgainDropsADeadTarget(t *testing.T) {
	all := []NodeInfo{testNode("a"), testNode("b"), testNode("c")}
	st := PartitionState{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a"}, Replicas: 1, Revision: 1}
	up, err := replicaCountMoves([]PartitionState{st}, "t", 2, all[:2])
	if err != nil || len(up) != 1 || fmt.Sprint(up[0].Move.Add) != "[b]" {
		t.Fatalf("planned %v, %v", up, err)
	}
	adding := step(t, up[0], nodeIDs(all[:2]), MoveAdding)
	dead := []NodeInfo{all[0], all[2]} // b died while catching up
	step(t, adding, nodeIDs(dead), MoveWaiting)

	again, err := replicaCountMoves([]PartitionState{adding}, "t", 2, dead)
	if err != nil || len(again) != 1 {
		t.Fatalf("asked again for 2: %v, %v", again, err)
	}
	if got := describe(again[0]); got != "L=a isr=[a] cu=[] r=1 e=0 move={[c] []}" {
		t.Fatalf("asked again for 2: %s", got)
	}

	back, err := replicaCountMoves([]PartitionState{adding}, "t", 1, dead)
	if err != nil || len(back) != 1 {
		t.Fatalf("asked for 1: %v, %v", back, err)
	}
	if got := describe(back[0]); got != "L=a isr=[a] cu=[] r=1 e=0 move={[] []}" {
		t.Fatalf("asked for 1: %s", got)
	}
	for _, st := range []PartitionState{again[0], back[0]} {
		if err := validPartitionState(st); err != nil {
			t.Fatalf("planned an invalid state %s: %v", describe(st), err)
		}
	}

	three, err := replicaCountMoves([]PartitionState{st}, "t", 3, all)
	if err != nil || len(three) != 1 {
		t.Fatalf("planned %v, %v", three, err)
	}
	st = joined(step(t, three[0], nodeIDs(all), MoveAdding), three[0].Move.Add[0])
	gone := three[0].Move.Add[1]
	left := []NodeInfo{all[0]}
	for _, n := range all[1:] {
		if n.ID != gone {
			left = append(left, n)
		}
	}
	down, err := replicaCountMoves([]PartitionState{st}, "t", 2, left)
	if err != nil || len(down) != 1 || len(down[0].ISR) != 2 || len(down[0].Catchup) != 0 || down[0].Move.Active() {
		t.Fatalf("a joined target and a dead one, asked for 2: %v, %v", down, err)
	}
}
