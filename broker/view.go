package broker

import (
	"context"
	"hash/maphash"
	"maps"
	"slices"

	"github.com/partitamq/partita/cluster"
)

// clusterView is what the etcd watches last said about the cluster: each
// partition's leader and whether it takes writes, each topic's metadata
// and channels, and how to reach each live node. A published view is never
// changed. A watch that delivers builds the next view from the current one
// and swaps it in whole, so forwarding and lookup read it with one atomic
// load and no lock, however busy the watches are.
//
// Partitions and topics are each spread over a fixed number of shards,
// each its own map, and a change copies the shard array and the shards it
// touches. With one map, every change would copy every partition: a
// failover that moves 3,300 of 10,000 leaders would copy 33 million
// entries. The assignment watch delivers a transaction's states together
// (a failover's elections go 128 to a transaction), and they make one new
// view, copying each shard they touch once. BenchmarkViewLeaderChanges
// compares the layouts and the batches.
type clusterView struct {
	partitions *shards[partitionKey, viewPartition]
	topics     *shards[string, viewTopic]
	nodes      map[string]cluster.NodeInfo // live nodes by ID; nil until the node watch delivers
	// nodesChanged is closed once a published view holds another set of
	// live nodes; nil until the node watch delivers.
	nodesChanged chan struct{}
}

// viewShards is a power of two near the square root of the ten thousand
// partitions a node is built for, so a change copies about as many shard
// pointers as entries.
const viewShards = 128

// shards is a map split over viewShards maps. It is never changed in
// place: with and without return a new one sharing every untouched shard.
// A nil *shards is empty.
type shards[K comparable, V any] [viewShards]map[K]V

var viewSeed = maphash.MakeSeed()

func shardOf[K comparable](key K) int {
	return int(maphash.Comparable(viewSeed, key) % viewShards)
}

func (s *shards[K, V]) get(key K) (V, bool) {
	if s == nil {
		var none V
		return none, false
	}
	v, ok := s[shardOf(key)][key]
	return v, ok
}

func (s *shards[K, V]) with(key K, v V) *shards[K, V] {
	e := s.edit()
	e.set(key, v)
	return e.result(s)
}

func (s *shards[K, V]) without(key K) *shards[K, V] {
	e := s.edit()
	e.remove(key)
	return e.result(s)
}

// shardEdit builds the next shards from s: each shard a change touches is
// copied on its first change only, so a batch of changes costs one copy of
// the shard array and one of each shard it touches.
type shardEdit[K comparable, V any] struct {
	next    shards[K, V]
	copied  [viewShards]bool
	changed bool
}

func (s *shards[K, V]) edit() *shardEdit[K, V] {
	e := &shardEdit[K, V]{}
	if s != nil {
		e.next = *s
	}
	return e
}

func (e *shardEdit[K, V]) get(key K) (V, bool) { return e.next.get(key) }

func (e *shardEdit[K, V]) shard(key K) map[K]V {
	i := shardOf(key)
	if !e.copied[i] {
		e.copied[i] = true
		next := maps.Clone(e.next[i])
		if next == nil {
			next = make(map[K]V, 1)
		}
		e.next[i] = next
	}
	e.changed = true
	return e.next[i]
}

func (e *shardEdit[K, V]) set(key K, v V) { e.shard(key)[key] = v }

func (e *shardEdit[K, V]) remove(key K) {
	if _, ok := e.get(key); ok {
		delete(e.shard(key), key)
	}
}

// result is the edited shards, or s itself when nothing changed.
func (e *shardEdit[K, V]) result(s *shards[K, V]) *shards[K, V] {
	if !e.changed {
		return s
	}
	return &e.next
}

// partitionKey names a partition in the cluster view.
type partitionKey struct {
	topic     string
	partition int32
}

// viewPartition is a partition the assignment watch delivered.
type viewPartition struct {
	lead     *leadership // never nil; its node is "" while the partition has no leader
	writable bool        // takesWrites: what /lookup?access=w lists
	epoch    int64       // EpochForWrite of the latest state: a forward's SeenEpoch
	isr      []string    // who else could lead the partition (toHandOff)
}

// same reports whether p holds what old does, so a delivery that changed
// nothing lookup or forwarding reads leaves the view as it was.
func (p viewPartition) same(old viewPartition) bool {
	return p.lead == old.lead && p.writable == old.writable && p.epoch == old.epoch && slices.Equal(p.isr, old.isr)
}

// viewTopic is a topic as the topic and channel watches describe it. The
// two watches deliver independently, so each keeps its own part: a
// channel may arrive before its topic, and a topic's deletion leaves the
// channels to the deletions the channel watch delivers.
type viewTopic struct {
	meta     cluster.TopicMeta // zero while the topic watch has not delivered it
	channels []string          // sorted; never changed in place
}

// leadership is a partition's leader as a view has it, "" for none. ended
// is cancelled once a published view names another leader, or none: a
// forward in flight to a leader that stopped answering (paused, cut off)
// then fails at once instead of waiting out its timeout. The client
// retries; the write may still surface, as any failed write may. A
// forward waiting for a leaderless partition to get one wakes then too.
type leadership struct {
	node  string
	ended context.Context
	end   context.CancelFunc
}

// emptyView is the view before the watches have said anything.
var emptyView clusterView

// leadership is the partition's leadership; known is false when the watch
// has not delivered the partition.
func (v *clusterView) leadership(key partitionKey) (l *leadership, known bool) {
	p, known := v.partitions.get(key)
	return p.lead, known
}

func newLeadership(node string) *leadership {
	l := &leadership{node: node}
	l.ended, l.end = context.WithCancel(context.Background())
	return l
}

// mayLead reports whether node may be about to lead the partition by what
// the view says: it names node, or it is older than the state a forwarder
// saw (seenEpoch), or it does not know the partition.
func (v *clusterView) mayLead(key partitionKey, node string, seenEpoch int64) bool {
	p, known := v.partitions.get(key)
	return !known || p.lead.node == node || p.epoch < seenEpoch
}

// epoch is the EpochForWrite of the partition's latest state.
func (v *clusterView) epoch(key partitionKey) int64 {
	p, _ := v.partitions.get(key)
	return p.epoch
}

// node is a live node's registration.
func (v *clusterView) node(id string) (cluster.NodeInfo, bool) {
	n, ok := v.nodes[id]
	return n, ok
}

// withPartition is v with st, a state the assignment watch delivered, and
// the leadership it replaced (withPartitions).
func (v *clusterView) withPartition(st cluster.PartitionState) (*clusterView, *leadership) {
	next, replaced := v.withPartitions([]cluster.PartitionState{st})
	if len(replaced) == 0 {
		return next, nil
	}
	return next, replaced[0]
}

// withPartitions is v with states, in the order the assignment watch
// delivered them, and the leaderships they replaced, to be ended once the
// new view is published. It is v itself when nothing lookup or forwarding
// reads changed; a leadership is kept while its leader stays, so forwards
// to it go on.
func (v *clusterView) withPartitions(states []cluster.PartitionState) (*clusterView, []*leadership) {
	e := v.partitions.edit()
	var replaced []*leadership
	for _, st := range states {
		key := partitionKey{st.Topic, st.Partition}
		old, had := e.get(key)
		if st.Leader == "" && st.Revision == 0 { // deleted
			if had {
				e.remove(key)
				replaced = append(replaced, old.lead)
			}
			continue
		}
		p := viewPartition{lead: old.lead, writable: takesWrites(st), epoch: st.EpochForWrite, isr: old.isr}
		if !had || !slices.Equal(old.isr, st.ISR) {
			p.isr = slices.Clone(st.ISR)
		}
		if !had || old.lead.node != st.Leader {
			if had {
				replaced = append(replaced, old.lead)
			}
			p.lead = newLeadership(st.Leader)
		}
		if !had || !p.same(old) {
			e.set(key, p)
		}
	}
	partitions := e.result(v.partitions)
	if partitions == v.partitions {
		return v, nil
	}
	next := *v
	next.partitions = partitions
	return &next, replaced
}

// toHandOff counts the partitions node leads that another live ISR member,
// not stopping itself, could lead instead: what a stopping node waits to
// see moved before it closes.
func (v *clusterView) toHandOff(node string) int {
	if v.partitions == nil {
		return 0
	}
	n := 0
	for _, shard := range v.partitions {
		for _, p := range shard {
			if p.lead.node == node && v.anotherMayLead(p.isr, node) {
				n++
			}
		}
	}
	return n
}

func (v *clusterView) anotherMayLead(isr []string, leader string) bool {
	for _, m := range isr {
		if info, live := v.nodes[m]; live && m != leader && !info.Leaving {
			return true
		}
	}
	return false
}

// withTopic is v with a topic the topic watch delivered, created, changed
// or deleted.
func (v *clusterView) withTopic(ev cluster.TopicEvent) *clusterView {
	t, _ := v.topics.get(ev.Topic.Name)
	switch {
	case !ev.Deleted && t.meta != ev.Topic:
		t.meta = ev.Topic
	case ev.Deleted && t.meta.CreatedUnixNano == ev.Topic.CreatedUnixNano && t.meta.Name != "":
		t.meta = cluster.TopicMeta{}
	default:
		return v
	}
	return v.withTopicEntry(ev.Topic.Name, t)
}

// withChannel is v with a channel the channel watch delivered, created or
// deleted.
func (v *clusterView) withChannel(ev cluster.ChannelEvent) *clusterView {
	t, _ := v.topics.get(ev.Channel.Topic)
	i, found := slices.BinarySearch(t.channels, ev.Channel.Name)
	if found != ev.Deleted {
		return v
	}
	if ev.Deleted {
		t.channels = slices.Delete(slices.Clone(t.channels), i, i+1)
	} else {
		t.channels = slices.Insert(slices.Clone(t.channels), i, ev.Channel.Name)
	}
	return v.withTopicEntry(ev.Channel.Topic, t)
}

func (v *clusterView) withTopicEntry(name string, t viewTopic) *clusterView {
	next := *v
	if t.meta.Name == "" && len(t.channels) == 0 {
		next.topics = v.topics.without(name)
	} else {
		next.topics = v.topics.with(name, t)
	}
	return &next
}

// withNodes is v with the live nodes replaced, and the channel to close
// once it is published.
func (v *clusterView) withNodes(nodes []cluster.NodeInfo) (*clusterView, chan struct{}) {
	byID := make(map[string]cluster.NodeInfo, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	next := *v
	next.nodes, next.nodesChanged = byID, make(chan struct{})
	return &next, v.nodesChanged
}

// lookup answers Broker.Lookup from the view. ok is false when the view
// cannot answer: it has not heard of the topic, of every one of its
// partitions, or of the live nodes yet.
func (v *clusterView) lookup(name string, forWrite bool) (out Leaders, ok bool) {
	t, known := v.topics.get(name)
	if !known || t.meta.Partitions == 0 || v.nodes == nil {
		return Leaders{}, false
	}
	out = Leaders{
		Partitions:  int(t.meta.Partitions),
		Replicas:    int(t.meta.Replicas),
		Channels:    slices.Clone(t.channels),
		ByPartition: make(map[int32]cluster.NodeInfo, t.meta.Partitions),
		Ordered:     t.meta.Ordered,
		Settings:    *settingsOf(t.meta),
	}
	out.Ext = t.meta.Ext
	for p := range t.meta.Partitions {
		st, known := v.partitions.get(partitionKey{name, p})
		if !known {
			return Leaders{}, false
		}
		if st.lead.node == "" || forWrite && !st.writable {
			continue
		}
		// A leader whose registration lapsed is not offered to clients.
		if n, live := v.nodes[st.lead.node]; live {
			out.ByPartition[p] = n
		}
	}
	return out, true
}

// currentView is the last published view.
func (b *Broker) currentView() *clusterView {
	if v := b.view.Load(); v != nil {
		return v
	}
	return &emptyView
}

// changeView publishes change applied to the current view, then runs what
// change returned to run once it is published (ending what it replaced;
// nil for nothing). The watches write from their own goroutines, so a swap
// that lost the race to another is redone on the view that won.
func (b *Broker) changeView(change func(*clusterView) (*clusterView, func())) {
	for {
		cur := b.view.Load()
		base := cur
		if base == nil {
			base = &emptyView
		}
		next, published := change(base)
		if next == base {
			return
		}
		if b.view.CompareAndSwap(cur, next) {
			if published != nil {
				published()
			}
			return
		}
	}
}

// setPartition records a partition state the assignment watch delivered
// (setPartitions).
func (b *Broker) setPartition(st cluster.PartitionState) {
	b.setPartitions([]cluster.PartitionState{st})
}

// setPartitions records a batch of partition states the assignment watch
// delivered, in one new view; forwards in flight to a former leader end,
// and forwards waiting for a partition's leader look again.
func (b *Broker) setPartitions(states []cluster.PartitionState) {
	b.known.set(states...)
	b.changeView(func(v *clusterView) (*clusterView, func()) {
		next, replaced := v.withPartitions(states)
		if len(replaced) == 0 {
			return next, nil
		}
		return next, func() {
			for _, l := range replaced {
				l.end()
			}
		}
	})
}

// setTopic records a topic the topic watch delivered.
func (b *Broker) setTopic(ev cluster.TopicEvent) {
	b.changeView(func(v *clusterView) (*clusterView, func()) { return v.withTopic(ev), nil })
}

// setChannel records a channel the channel watch delivered.
func (b *Broker) setChannel(ev cluster.ChannelEvent) {
	b.changeView(func(v *clusterView) (*clusterView, func()) { return v.withChannel(ev), nil })
}

// setNodes records the live nodes' registrations; forwards waiting for a
// leader's registration look again.
func (b *Broker) setNodes(nodes []cluster.NodeInfo) {
	b.changeView(func(v *clusterView) (*clusterView, func()) {
		next, replaced := v.withNodes(nodes)
		if replaced == nil {
			return next, nil
		}
		return next, func() { close(replaced) }
	})
}

// LeadershipsToHandOff counts, by the node's view, the partitions it leads
// that another live ISR member could lead: a stopping node waits for them
// to be moved off it.
func (b *Broker) LeadershipsToHandOff() int { return b.currentView().toHandOff(b.cfg.NodeID) }

// MisdirectedForwards counts the forwards that reached this node for
// partitions it did not lead: a stopping node keeps serving while they
// come, since their forwarders still name it.
func (b *Broker) MisdirectedForwards() int64 { return b.misdirected.Load() }

// followNodes keeps the live nodes' registrations in the view.
func (b *Broker) followNodes(ctx context.Context) {
	if b.cfg.Etcd == nil {
		return
	}
	for nodes := range cluster.WatchNodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix) {
		b.setNodes(nodes)
	}
}
