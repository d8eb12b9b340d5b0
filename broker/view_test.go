package broker

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/partitamq/partita/cluster"
)

// leads is the state of a partition node leads alone; "" is a partition
// without a leader.
func leads(key partitionKey, node string) cluster.PartitionState {
	st := cluster.PartitionState{Topic: key.topic, Partition: key.partition, Leader: node, Replicas: 1, Revision: 1}
	if node != "" {
		st.ISR = []string{node}
	}
	return st
}

// leader is the partition's leadership, nil while the view names no leader.
func (v *clusterView) leader(key partitionKey) *leadership {
	if l, _ := v.leadership(key); l != nil && l.node != "" {
		return l
	}
	return nil
}

// viewOf is a view where node leads partitions 0..n-1 of each topic named.
func viewOf(node string, n int, topics ...string) *clusterView {
	v := &emptyView
	for _, name := range topics {
		for p := range n {
			v, _ = v.withPartition(leads(partitionKey{name, int32(p)}, node))
		}
	}
	return v
}

// A change makes a new view and leaves the one it started from as it was,
// sharing every leadership it did not change.
func TestViewChangeLeavesThePublishedViewAsItWas(t *testing.T) {
	before := viewOf("n1", 500, "a", "b")
	moved := partitionKey{"a", 7}
	after, replaced := before.withPartition(leads(moved, "n2"))
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
	if gone, _ := after.withPartition(leads(moved, "")); gone.leader(moved) != nil {
		t.Fatal("a partition with no leader still has one")
	}
}

// A delivery that names the leader the view has changes nothing; one that
// names another, or none, ends the former leadership.
func TestViewLeadershipEndsWhenAnotherNodeLeads(t *testing.T) {
	b := &Broker{}
	key := partitionKey{"t", 3}
	b.setPartition(leads(key, "n2"))
	first, view := b.currentView().leader(key), b.currentView()
	b.setPartition(leads(key, "n2"))
	if b.currentView() != view || first.ended.Err() != nil {
		t.Fatal("naming the same leader again made a new view or ended the leadership")
	}
	b.setPartition(leads(key, "n3"))
	second := b.currentView().leader(key)
	if first.ended.Err() == nil || second.node != "n3" || second.ended.Err() != nil {
		t.Fatalf("after n3 took over: n2's leadership ended %v, the view names %s", first.ended.Err() != nil, second.node)
	}
	b.setPartition(leads(key, ""))
	if second.ended.Err() == nil || b.currentView().leader(key) != nil {
		t.Fatal("a partition left without a leader kept its leadership")
	}
}

// A batch of states makes one view, as the states one at a time would:
// each leadership a batch replaces ends once that view is published, one
// that moves twice in a batch ends as well, and the batch's own states
// leave the published view untouched until then.
func TestViewBatchIsOneViewOfItsStatesInOrder(t *testing.T) {
	b := &Broker{}
	for p := range int32(200) {
		b.setPartition(leads(partitionKey{"t", p}, "n1"))
	}
	before := b.currentView()
	moved, twice, gone, kept := partitionKey{"t", 1}, partitionKey{"t", 2}, partitionKey{"t", 3}, partitionKey{"t", 4}
	was := map[partitionKey]*leadership{}
	for _, k := range []partitionKey{moved, twice, gone, kept} {
		was[k] = before.leader(k)
	}
	batch := []cluster.PartitionState{
		leads(moved, "n2"),
		leads(twice, "n2"),
		leads(kept, "n1"),
		{Topic: gone.topic, Partition: gone.partition}, // deleted
		leads(twice, "n3"),
		leads(partitionKey{"u", 0}, "n2"), // a partition the view did not hold
	}
	next, replaced := before.withPartitions(batch)
	if before.leader(moved).node != "n1" || before.leader(twice).node != "n1" {
		t.Fatal("the batch changed the view it started from")
	}
	if got := len(replaced); got != 4 {
		t.Errorf("the batch handed back %d leaderships to end, want 4 (moved, twice ×2, deleted)", got)
	}
	b.setPartitions(batch)
	after := b.currentView()
	for k, want := range map[partitionKey]string{moved: "n2", twice: "n3", kept: "n1", {"u", 0}: "n2"} {
		if l := after.leader(k); l == nil || l.node != want {
			t.Errorf("%v: led by %+v, want %s", k, l, want)
		}
		if l := next.leader(k); l == nil || l.node != want {
			t.Errorf("%v in the unpublished view: led by %+v, want %s", k, l, want)
		}
	}
	if _, known := after.leadership(gone); known {
		t.Error("the deleted partition is still in the view")
	}
	for _, k := range []partitionKey{moved, twice, gone} {
		if was[k].ended.Err() == nil {
			t.Errorf("%v: the replaced leadership did not end", k)
		}
	}
	if was[kept].ended.Err() != nil || after.leader(kept) != was[kept] {
		t.Error("the leadership the batch named again ended or was replaced")
	}
	if after.leader(twice).ended.Err() != nil {
		t.Error("the last leadership of the partition that moved twice ended")
	}
	for p := int32(5); p < 200; p++ {
		if k := (partitionKey{"t", p}); after.leader(k) != before.leader(k) {
			t.Fatalf("%v: the batch replaced a leadership it did not name", k)
		}
	}
	if v := b.currentView(); func() bool { b.setPartitions(batch[2:3]); return b.currentView() != v }() {
		t.Error("a batch that changes nothing made a new view")
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
			b.setPartition(leads(partitionKey{"t", int32(p)}, fmt.Sprint("n", p%3)))
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
// 10,000 partitions, 3,300 change leader, one view each ("sharded") or one
// view a transaction of 128 elections ("batched", as the watch delivers
// them). "flat" is one view each with one copy-on-write map.
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
				v, _ = v.withPartition(leads(partitionKey{names[i%topics], int32(i / topics)}, "n2"))
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		start := viewOf("n1", partitions, names...)
		var batch []cluster.PartitionState
		for b.Loop() {
			v := start
			for i := range moved {
				batch = append(batch, leads(partitionKey{names[i%topics], int32(i / topics)}, "n2"))
				if len(batch) == 128 || i == moved-1 {
					v, _ = v.withPartitions(batch)
					batch = batch[:0]
				}
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

// withTopicLedBy is v with a topic of n partitions, created at created,
// that node leads, and node the one live node.
func withTopicLedBy(v *clusterView, node, name string, n int32, created int64) *clusterView {
	for p := range n {
		v, _ = v.withPartition(leads(partitionKey{name, p}, node))
	}
	v, _ = v.withNodes([]cluster.NodeInfo{{ID: node, TCPAddress: node + ":4150"}})
	return v.withTopic(cluster.TopicEvent{Topic: cluster.TopicMeta{Name: name, Partitions: n, Replicas: 1, CreatedUnixNano: created}})
}

// The view answers a lookup only for a topic it knows whole: its
// metadata, every partition and the live nodes; otherwise the broker reads
// etcd. A leader whose registration lapsed is left out.
func TestViewLookupOnlyForATopicItKnowsWhole(t *testing.T) {
	v := withTopicLedBy(&emptyView, "n1", "t", 3, 1)
	out, ok := v.lookup("t", false)
	if !ok || out.Partitions != 3 || out.Replicas != 1 || len(out.ByPartition) != 3 || out.ByPartition[2].TCPAddress != "n1:4150" {
		t.Fatalf("lookup of a topic the view knows whole: %+v, %v", out, ok)
	}
	partial, _ := v.withPartition(cluster.PartitionState{Topic: "t", Partition: 1}) // deleted
	unknown := v.withTopic(cluster.TopicEvent{Topic: cluster.TopicMeta{Name: "t", CreatedUnixNano: 1}, Deleted: true})
	noNodes := *v
	noNodes.nodes = nil
	for what, v := range map[string]*clusterView{"a partition missing": partial, "the topic deleted": unknown, "no node registrations yet": &noNodes} {
		if out, ok := v.lookup("t", false); ok {
			t.Fatalf("with %s the view answered %+v", what, out)
		}
	}
	if _, ok := v.lookup("other", false); ok {
		t.Fatal("the view answered for a topic it never heard of")
	}
	lapsed, _ := v.withPartition(leads(partitionKey{"t", 0}, "n9"))
	if out, ok := lapsed.lookup("t", false); !ok || len(out.ByPartition) != 2 {
		t.Fatalf("with partition 0 led by an unregistered node: %+v, %v; want partitions 1 and 2", out, ok)
	}
}

// access=w leaves out a partition whose leader disabled its writes and one
// whose ISR holds no majority; access=r lists both.
func TestViewLookupForWriteOmitsPartitionsTakingNoWrites(t *testing.T) {
	v := withTopicLedBy(&emptyView, "n1", "t", 3, 1)
	disabled := cluster.PartitionState{Topic: "t", Partition: 0, Leader: "n1", ISR: []string{"n1", "n2", "n3"}, Replicas: 3, WriteDisabled: true, Revision: 2}
	minority := cluster.PartitionState{Topic: "t", Partition: 1, Leader: "n1", ISR: []string{"n1"}, Replicas: 3, Revision: 2}
	kept := v.leader(partitionKey{"t", 0})
	v, _ = v.withPartition(disabled)
	v, _ = v.withPartition(minority)
	if v.leader(partitionKey{"t", 0}) != kept {
		t.Fatal("disabling writes replaced the leadership, ending the forwards to the same leader")
	}
	write, _ := v.lookup("t", true)
	read, _ := v.lookup("t", false)
	if len(write.ByPartition) != 1 || write.ByPartition[2].ID != "n1" || len(read.ByPartition) != 3 {
		t.Fatalf("access=w lists %v, access=r %v; want partition 2 alone, then all three", write.ByPartition, read.ByPartition)
	}
}

// Channels come from the channel watch, which may deliver before or after
// the topic's metadata: each keeps its part of the topic. The deletion of
// an earlier incarnation of a topic leaves the one created since.
func TestViewTopicsAndChannelsFromTheirOwnWatches(t *testing.T) {
	channel := func(name string, deleted bool) cluster.ChannelEvent {
		return cluster.ChannelEvent{Channel: cluster.ChannelMeta{Topic: "t", Name: name}, Deleted: deleted}
	}
	v := emptyView.withChannel(channel("b", false)) // before the topic
	v = withTopicLedBy(v, "n1", "t", 1, 2)
	v = v.withChannel(channel("a", false)).withChannel(channel("c", false)).withChannel(channel("c", true))
	before := v
	v = v.withChannel(channel("a", false))
	if v != before {
		t.Fatal("a channel delivered twice made a new view")
	}
	if out, ok := v.lookup("t", false); !ok || !slices.Equal(out.Channels, []string{"a", "b"}) {
		t.Fatalf("channels %v (%v), want [a b]", out.Channels, ok)
	}
	v = v.withTopic(cluster.TopicEvent{Topic: cluster.TopicMeta{Name: "t", Partitions: 1, Replicas: 1, CreatedUnixNano: 1}, Deleted: true})
	if _, ok := v.lookup("t", false); !ok {
		t.Fatal("the deletion of an earlier incarnation removed the topic")
	}
	v = v.withTopic(cluster.TopicEvent{Topic: cluster.TopicMeta{Name: "t", CreatedUnixNano: 2}, Deleted: true})
	if _, ok := v.lookup("t", false); ok {
		t.Fatal("the view answers for a deleted topic")
	}
	if got, _ := v.topics.get("t"); !slices.Equal(got.channels, []string{"a", "b"}) {
		t.Fatalf("the topic's deletion took its channels %v before the channel watch did", got.channels)
	}
}

// A stopping node waits for the leaderships another live member of the
// ISR could take; a partition it alone may lead, or whose other members
// are gone or stopping too, is not waited for. A change of ISR reaches the
// count.
func TestViewCountsTheLeadershipsAStoppingNodeCanHandOff(t *testing.T) {
	st := func(p int32, leader string, isr ...string) cluster.PartitionState {
		return cluster.PartitionState{Topic: "t", Partition: p, Leader: leader, ISR: isr, Replicas: 3, Revision: 1}
	}
	v, _ := (&emptyView).withPartitions([]cluster.PartitionState{
		st(0, "n1", "n1", "n2", "n3"),
		st(1, "n1", "n1", "n3"), // n3 is gone
		st(2, "n1", "n1"),
		st(3, "n2", "n2", "n1"),
		st(4, "n1", "n1", "n4"), // n4 is stopping too
	})
	v, _ = v.withNodes([]cluster.NodeInfo{{ID: "n1", Leaving: true}, {ID: "n2"}, {ID: "n4", Leaving: true}})
	if got := v.toHandOff("n1"); got != 1 {
		t.Fatalf("n1 has %d leaderships to hand off, want 1: t/0's to n2", got)
	}
	v, _ = v.withPartitions([]cluster.PartitionState{st(2, "n1", "n1", "n2")})
	if got := v.toHandOff("n1"); got != 2 {
		t.Fatalf("after n2 joined t/2's ISR n1 has %d to hand off, want 2", got)
	}
	v, _ = v.withPartitions([]cluster.PartitionState{st(0, "n2", "n1", "n2", "n3"), st(2, "n2", "n2", "n1")})
	if got := v.toHandOff("n1"); got != 0 {
		t.Fatalf("after both moved n1 has %d to hand off, want 0", got)
	}
	if got := (&emptyView).toHandOff("n1"); got != 0 {
		t.Fatalf("an empty view has %d to hand off", got)
	}
}
