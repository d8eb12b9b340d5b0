package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/partitamq/partita/cluster"
)

// viewOf is a view where node leads partitions 0..n-1 of each topic named.
func viewOf(node string, n int, topics ...string) *clusterView {
	v := &emptyView
	for _, name := range topics {
		for p := range n {
			v, _ = v.withLeader(partitionKey{name, int32(p)}, node)
		}
	}
	return v
}

// A change makes a new view and leaves the one it started from as it was,
// sharing every leadership it did not change.
func TestViewChangeLeavesThePublishedViewAsItWas(t *testing.T) {
	before := viewOf("n1", 500, "a", "b")
	moved := partitionKey{"a", 7}
	after, replaced := before.withLeader(moved, "n2")
	if replaced != before.leader(moved) {
		t.Fatal("the change did not hand back the leadership it replaced")
	}
	if got := before.leader(moved).node; got != "n1" {
		t.Fatalf("the earlier view now says %s leads a/7", got)
	}
	if got := after.leader(moved).node; got != "n2" {
		t.Fatalf("the new view says %s leads a/7, want n2", got)
	}
	for _, name := range []string{"a", "b"} {
		for p := range int32(500) {
			key := partitionKey{name, p}
			if key != moved && after.leader(key) != before.leader(key) {
				t.Fatalf("%v: the new view does not share the unchanged leadership", key)
			}
		}
	}
	if gone, _ := after.withLeader(moved, ""); gone.leader(moved) != nil {
		t.Fatal("a partition with no leader still has one")
	}
}

// A delivery that names the leader the view has changes nothing; one that
// names another, or none, ends the former leadership.
func TestViewLeadershipEndsWhenAnotherNodeLeads(t *testing.T) {
	b := &Broker{}
	key := partitionKey{"t", 3}
	b.setLeader(key, "n2")
	first, view := b.currentView().leader(key), b.currentView()
	b.setLeader(key, "n2")
	if b.currentView() != view || first.ended.Err() != nil {
		t.Fatal("naming the same leader again made a new view or ended the leadership")
	}
	b.setLeader(key, "n3")
	second := b.currentView().leader(key)
	if first.ended.Err() == nil || second.node != "n3" || second.ended.Err() != nil {
		t.Fatalf("after n3 took over: n2's leadership ended %v, the view names %s", first.ended.Err() != nil, second.node)
	}
	b.setLeader(key, "")
	if second.ended.Err() == nil || b.currentView().leader(key) != nil {
		t.Fatal("a partition left without a leader kept its leadership")
	}
}

// The node and assignment watches swap the view from two goroutines; each
// keeps the other's changes.
func TestViewConcurrentWatchesKeepEachOthersChanges(t *testing.T) {
	b := &Broker{}
	const leaders, nodeSets = 2000, 500
	var wg sync.WaitGroup
	wg.Go(func() {
		for p := range leaders {
			b.setLeader(partitionKey{"t", int32(p)}, fmt.Sprint("n", p%3))
		}
	})
	wg.Go(func() {
		for i := range nodeSets {
			b.setNodes([]cluster.NodeInfo{{ID: "n0"}, {ID: "n1"}, {ID: fmt.Sprint("x", i)}})
		}
	})
	wg.Wait()
	v := b.currentView()
	for p := range leaders {
		if l := v.leader(partitionKey{"t", int32(p)}); l == nil || l.node != fmt.Sprint("n", p%3) {
			t.Fatalf("partition %d: leadership %+v lost to a concurrent swap", p, l)
		}
	}
	if _, ok := v.node(fmt.Sprint("x", nodeSets-1)); !ok || len(v.nodes) != 3 {
		t.Fatalf("nodes %v, want the last set delivered", slices.Sorted(maps.Keys(v.nodes)))
	}
}

// BenchmarkViewLeaderChanges is a failover's burst as the view takes it: of
// 10,000 partitions, 3,300 change leader, one watch delivery each. "flat"
// is the same with one copy-on-write map, for comparison.
func BenchmarkViewLeaderChanges(b *testing.B) {
	const topics, partitions, moved = 100, 100, 3300
	names := make([]string, topics)
	for i := range names {
		names[i] = fmt.Sprint("topic", i)
	}
	b.Run("sharded", func(b *testing.B) {
		start := viewOf("n1", partitions, names...)
		for b.Loop() {
			v := start
			for i := range moved {
				v, _ = v.withLeader(partitionKey{names[i%topics], int32(i / topics)}, "n2")
			}
		}
	})
	b.Run("flat", func(b *testing.B) {
		start := map[partitionKey]string{}
		for _, name := range names {
			for p := range partitions {
				start[partitionKey{name, int32(p)}] = "n1"
			}
		}
		for b.Loop() {
			v := start
			for i := range moved {
				next := maps.Clone(v)
				next[partitionKey{names[i%topics], int32(i / topics)}] = "n2"
				v = next
			}
		}
	})
}
