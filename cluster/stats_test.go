package cluster

import (
	"slices"
	"testing"
	"time"
)

// Each partition counts for what it lacks; a node holding replicas without
// a registration is named gone; the cluster is stable only when nothing
// is lacking and no upgrade is under way.
func TestSummarizeCountsWhatEachPartitionLacks(t *testing.T) {
	live := []NodeInfo{testNode("a"), testNode("b"), testNode("c")}
	st := func(p int32, leader string, isr ...string) PartitionState {
		return PartitionState{Topic: "t", Partition: p, Leader: leader, ISR: isr, Replicas: 3, Revision: 1}
	}
	disabled := st(3, "a", "a", "b", "c")
	disabled.WriteDisabled = true
	moving := st(4, "b", "a", "b", "c")
	moving.Move = Move{Add: []string{"d"}, Remove: []string{"c"}}
	moving.Catchup = []string{"d"}
	states := []PartitionState{
		st(0, "a", "a", "b", "c"), // healthy
		st(5, "a", "a", "b", "x"), // a gone ISR member
		st(1, "x", "x", "b", "c"), // leader gone
		st(2, "", "b", "c"),       // resigned, and short of a member
		disabled,
		moving,
	}
	got := Summarize(states, live, map[string]bool{"c": true}, Upgrade{}, "b")
	if got.Stable || got.Controller != "b" || got.Partitions != 6 || got.Leaderless != 2 || got.UnderReplicated != 3 || got.WriteDisabled != 1 || got.Moving != 1 {
		t.Fatalf("stats %+v", got)
	}
	if want := []string{"d", "x"}; !slices.Equal(got.Gone, want) {
		t.Fatalf("gone %v, want %v", got.Gone, want)
	}
	var nodes []string
	for _, n := range got.Nodes {
		nodes = append(nodes, n.Node.ID)
	}
	if !slices.Equal(nodes, []string{"a", "b", "c"}) {
		t.Fatalf("nodes %v, want the live ones in order", nodes)
	}
	if a, c := got.Nodes[0], got.Nodes[2]; a.Replicas != 4 || a.Leading != 3 || a.Draining || c.Replicas != 5 || c.Leading != 0 || !c.Draining {
		t.Fatalf("node a %+v, node c %+v", a, c)
	}

	if healthy := Summarize(states[:1], live, nil, Upgrade{}, "a"); !healthy.Stable || len(healthy.Gone) != 0 {
		t.Fatalf("a healthy cluster: %+v", healthy)
	}
	if upgrading := Summarize(states[:1], live, nil, Upgrade{Since: time.Unix(1, 0)}, "a"); upgrading.Stable || !upgrading.Upgrade.Active() {
		t.Fatalf("a healthy cluster being upgraded: %+v", upgrading)
	}
}
