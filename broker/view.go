package broker

import (
	"context"
	"hash/maphash"
	"maps"

	"github.com/partitamq/partita/cluster"
)

// clusterView is what the etcd watches last said about the cluster: who
// leads each partition and how to reach each live node. A published view is
// never changed. A watch that delivers builds the next view from the
// current one and swaps it in whole, so forwarding reads leaders and nodes
// with one atomic load and no lock, however busy the watches are.
//
// Leaders are spread over a fixed number of shards, each its own map, and a
// change copies the shard array and the one shard it touches. With one map,
// every change would copy every partition: a failover that moves 3,300 of
// 10,000 leaders would copy 33 million entries, one leader at a time.
// Batching would not help: the watches hand over one state at a time on
// unbuffered channels, so draining one before a swap finds at most the
// state its sender is waiting to hand over. BenchmarkViewLeaderChanges
// compares the two layouts.
type clusterView struct {
	leaders [viewShards]map[partitionKey]*leadership
	nodes   map[string]cluster.NodeInfo // live nodes by ID
}

// viewShards is a power of two near the square root of the ten thousand
// partitions a node is built for, so a change copies about as many shard
// pointers as entries.
const viewShards = 128

// partitionKey names a partition in the cluster view.
type partitionKey struct {
	topic     string
	partition int32
}

// leadership is a partition's leader as a view has it. ended is cancelled
// once a published view names another leader, or none: a forward in flight
// to a leader that stopped answering (paused, cut off) then fails at once
// instead of waiting out its timeout. The client retries; the write may
// still surface, as any failed write may.
type leadership struct {
	node  string
	ended context.Context
	end   context.CancelFunc
}

// emptyView is the view before the watches have said anything.
var emptyView clusterView

var viewSeed = maphash.MakeSeed()

func shardOf(key partitionKey) int {
	return int(maphash.Comparable(viewSeed, key) % viewShards)
}

// leader is the partition's leadership, nil when the watch has not named a
// leader.
func (v *clusterView) leader(key partitionKey) *leadership {
	return v.leaders[shardOf(key)][key]
}

// node is a live node's registration.
func (v *clusterView) node(id string) (cluster.NodeInfo, bool) {
	n, ok := v.nodes[id]
	return n, ok
}

// withLeader is v with node leading key ("" for none), and the leadership
// that replaced, to be ended once the new view is published. It is v itself
// when the leader stays, so forwards to it go on.
func (v *clusterView) withLeader(key partitionKey, node string) (*clusterView, *leadership) {
	s := shardOf(key)
	old := v.leaders[s][key]
	if old == nil && node == "" || old != nil && old.node == node {
		return v, nil
	}
	shard := maps.Clone(v.leaders[s])
	if shard == nil {
		shard = make(map[partitionKey]*leadership, 1)
	}
	if node == "" {
		delete(shard, key)
	} else {
		l := &leadership{node: node}
		l.ended, l.end = context.WithCancel(context.Background())
		shard[key] = l
	}
	next := *v
	next.leaders[s] = shard
	return &next, old
}

// withNodes is v with the live nodes replaced.
func (v *clusterView) withNodes(nodes []cluster.NodeInfo) *clusterView {
	byID := make(map[string]cluster.NodeInfo, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	next := *v
	next.nodes = byID
	return &next
}

// currentView is the last published view.
func (b *Broker) currentView() *clusterView {
	if v := b.view.Load(); v != nil {
		return v
	}
	return &emptyView
}

// changeView publishes change applied to the current view, then ends the
// leadership the change replaced. The node and assignment watches write
// from their own goroutines, so a swap that lost the race to the other is
// redone on the view that won.
func (b *Broker) changeView(change func(*clusterView) (*clusterView, *leadership)) {
	for {
		cur := b.view.Load()
		base := cur
		if base == nil {
			base = &emptyView
		}
		next, replaced := change(base)
		if next == base {
			return
		}
		if b.view.CompareAndSwap(cur, next) {
			if replaced != nil {
				replaced.end()
			}
			return
		}
	}
}

// setLeader records node as key's leader ("" for none); forwards in flight
// to a former leader end.
func (b *Broker) setLeader(key partitionKey, node string) {
	b.changeView(func(v *clusterView) (*clusterView, *leadership) { return v.withLeader(key, node) })
}

// setNodes records the live nodes' registrations.
func (b *Broker) setNodes(nodes []cluster.NodeInfo) {
	b.changeView(func(v *clusterView) (*clusterView, *leadership) { return v.withNodes(nodes), nil })
}

// followNodes keeps the live nodes' registrations in the view.
func (b *Broker) followNodes(ctx context.Context) {
	if b.cfg.Etcd == nil {
		return
	}
	for nodes := range cluster.WatchNodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix) {
		b.setNodes(nodes)
	}
}
