package broker

import (
	"context"
	"sort"
	"time"

	"github.com/partitamq/partita/cluster"
)

// The cluster-wide directory behind nsqlookupd's /lookup, /topics,
// /channels and /nodes: every node answers for the whole cluster, so a tool
// pointed at any one node sees every topic, channel and node. Ephemeral
// topics exist only on the node that has them and are added from the local
// registry.

// TopicNames lists every topic in the cluster, sorted.
func (b *Broker) TopicNames(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, t := range b.Topics() {
		seen[t.Name] = true
	}
	if b.cfg.Assignments != nil {
		metas, err := b.meta.Topics(ctx)
		if err != nil {
			return nil, err
		}
		for _, m := range metas {
			seen[m.Name] = true
		}
	}
	return sortedKeys(seen), nil
}

// ChannelNames lists a topic's channels cluster-wide, sorted; none for a
// topic that does not exist.
func (b *Broker) ChannelNames(ctx context.Context, topicName string) ([]string, error) {
	seen := map[string]bool{}
	if t := b.Topic(topicName); t != nil {
		for _, c := range t.ChannelNames() {
			seen[c] = true
		}
	}
	if b.cfg.Assignments != nil {
		if _, ok, err := b.meta.Topic(ctx, topicName); err != nil {
			return nil, err
		} else if ok {
			chans, err := b.meta.Channels(ctx, topicName)
			if err != nil {
				return nil, err
			}
			for _, c := range chans {
				seen[c.Name] = true
			}
		}
	}
	return sortedKeys(seen), nil
}

// NodeTopics is a live node and the topics it leads a partition of: what
// nsqlookupd's /nodes calls a producer's topics. Tombstoned[i] tells
// whether Topics[i] has a live tombstone for this node.
type NodeTopics struct {
	Node       cluster.NodeInfo
	Self       bool
	Topics     []string
	Tombstoned []bool
}

// Nodes lists the cluster's live nodes, each with the topics it leads at
// least one partition of, sorted by node ID.
func (b *Broker) Nodes(ctx context.Context) ([]NodeTopics, error) {
	self := NodeTopics{Node: cluster.NodeInfo{ID: b.cfg.NodeID}, Self: true}
	if b.cfg.Assignments == nil {
		for _, t := range b.Topics() {
			self.Topics = append(self.Topics, t.Name)
		}
		return []NodeTopics{self}, nil
	}
	infos, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return nil, err
	}
	led := map[string]map[string]bool{} // node → topics it leads
	lead := func(node, topicName string) {
		if led[node] == nil {
			led[node] = map[string]bool{}
		}
		led[node][topicName] = true
	}
	for _, t := range b.Topics() {
		if t.Ephemeral {
			lead(b.cfg.NodeID, t.Name)
		}
	}
	metas, err := b.meta.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range metas {
		states, err := b.cfg.Assignments.List(ctx, m.Name)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			lead(st.Leader, m.Name)
		}
	}
	tombs, err := cluster.Tombstones(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return nil, err
	}
	out := make([]NodeTopics, 0, len(infos))
	for _, n := range infos {
		nt := NodeTopics{Node: n, Self: n.ID == b.cfg.NodeID, Topics: sortedKeys(led[n.ID])}
		for _, t := range nt.Topics {
			nt.Tombstoned = append(nt.Tombstoned, tombs[n.HTTPAddress][t])
		}
		out = append(out, nt)
	}
	if len(out) == 0 {
		self.Topics = sortedKeys(led[b.cfg.NodeID])
		self.Tombstoned = make([]bool, len(self.Topics))
		out = append(out, self)
	}
	return out, nil
}

// TombstoneLifetime is how long a tombstone lasts: nsqlookupd's default
// --tombstone-lifetime.
const TombstoneLifetime = 45 * time.Second

// Tombstone records nsqlookupd's tombstone of node (its HTTP address) for
// a topic, cluster-wide, for TombstoneLifetime. Leaders stay where the
// controller put them and /lookup still lists them: a Partita node cannot
// leave a topic on request. What the mark does is keep the topic from the
// /topic/delete nsqadmin sends that node next (see TakeTombstone).
func (b *Broker) Tombstone(ctx context.Context, topicName, node string) error {
	if b.cfg.Etcd == nil {
		return nil
	}
	return cluster.PutTombstone(ctx, b.cfg.Etcd, b.cfg.MetaPrefix, topicName, node, TombstoneLifetime)
}

// TakeTombstone consumes node's live tombstone for a topic, if any. In
// nsqd, deleting a topic from a tombstoned node drops that node's copy
// only; in Partita a delete drops the topic from every node, so a delete
// that follows a tombstone is refused rather than widened.
func (b *Broker) TakeTombstone(ctx context.Context, topicName, node string) (bool, error) {
	if b.cfg.Etcd == nil {
		return false, nil
	}
	return cluster.TakeTombstone(ctx, b.cfg.Etcd, b.cfg.MetaPrefix, topicName, node)
}

func sortedKeys(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// takesWrites: the leader has not disabled its writes and its ISR holds a
// majority of the replicas.
func takesWrites(st cluster.PartitionState) bool {
	return !st.WriteDisabled && len(st.ISR) > int(st.Replicas)/2
}

// Leaders is where a topic's partitions are led, cluster-wide, for
// nsqlookupd's /lookup: partition → the leader's registration.
type Leaders struct {
	Partitions, Replicas int
	Channels             []string
	ByPartition          map[int32]cluster.NodeInfo
	Ext                  bool // youzan's extend_support
	// The topic's shape and settings, for /lookup?metainfo=true.
	Ordered  bool
	Settings Settings
}

// Lookup finds a topic's partition leaders across the cluster; found is
// false for a topic that does not exist. forWrite leaves out partitions that
// take no writes now (nsqlookupd's access=w). It answers from the cluster
// view, and reads etcd only for a topic the view does not know whole yet:
// a client asks any node right after creating a topic on another, sooner
// than the watches may have told this one.
func (b *Broker) Lookup(ctx context.Context, name string, forWrite bool) (Leaders, bool, error) {
	if t := b.Topic(name); t != nil && (t.Ephemeral || b.cfg.Assignments == nil) {
		self := cluster.NodeInfo{ID: b.cfg.NodeID}
		out := Leaders{Partitions: t.NumPartitions(), Replicas: 1, Channels: t.ChannelNames(), ByPartition: map[int32]cluster.NodeInfo{},
			Ordered: t.Ordered, Settings: t.Settings()}
		out.Ext = t.Ext()
		for p := range t.NumPartitions() {
			if t.Leads(p) {
				out.ByPartition[int32(p)] = self
			}
		}
		return out, true, nil
	}
	if out, ok := b.currentView().lookup(name, forWrite); ok {
		return out, true, nil
	}
	return b.lookupInEtcd(ctx, name, forWrite)
}

// lookupInEtcd is Lookup from the partition states, topic metadata and
// node registrations in etcd: four reads.
func (b *Broker) lookupInEtcd(ctx context.Context, name string, forWrite bool) (Leaders, bool, error) {
	m, ok, err := b.meta.Topic(ctx, name)
	if err != nil || !ok {
		return Leaders{}, false, err
	}
	chans, err := b.meta.Channels(ctx, name)
	if err != nil {
		return Leaders{}, false, err
	}
	states, err := b.cfg.Assignments.List(ctx, name)
	if err != nil {
		return Leaders{}, false, err
	}
	nodes, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
	if err != nil {
		return Leaders{}, false, err
	}
	byID := make(map[string]cluster.NodeInfo, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	out := Leaders{Partitions: int(m.Partitions), Replicas: int(m.Replicas), ByPartition: map[int32]cluster.NodeInfo{},
		Ordered: m.Ordered, Settings: *settingsOf(m)}
	out.Ext = m.Ext
	for _, c := range chans {
		out.Channels = append(out.Channels, c.Name)
	}
	for _, st := range states {
		// A leader whose registration lapsed is not offered to clients, nor
		// a partition an expand cut short stored beyond the topic's count.
		n, live := byID[st.Leader]
		if !live || forWrite && !takesWrites(st) || st.Partition >= m.Partitions {
			continue
		}
		out.ByPartition[st.Partition] = n
	}
	return out, true, nil
}

// LookupNodes are the nodes that answer nsqlookupd's API, which is every
// live node, and the one youzan's clients are told leads them: the
// controller, with the revision of its election as the epoch. Without
// etcd, this node alone.
func (b *Broker) LookupNodes(ctx context.Context) (nodes []cluster.NodeInfo, leader string, epoch int64, err error) {
	if b.cfg.Etcd == nil {
		return []cluster.NodeInfo{{ID: b.cfg.NodeID}}, b.cfg.NodeID, 0, nil
	}
	if nodes, err = cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix); err != nil {
		return nil, "", 0, err
	}
	if leader, epoch, err = cluster.ElectedController(ctx, b.cfg.Etcd, b.cfg.MetaPrefix); err != nil {
		return nil, "", 0, err
	}
	return nodes, leader, epoch, nil
}

// IsSelf tells whether id is this node's.
func (b *Broker) IsSelf(id string) bool { return id == b.cfg.NodeID }
