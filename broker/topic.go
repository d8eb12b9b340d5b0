package broker

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
)

// Topic is a topic as the node's sessions see it: its partition actors and
// the names of its channels.
type Topic struct {
	Name      string
	Ephemeral bool
	Replicas  int
	Ordered   bool // consumed only with SUB_ORDERED
	// parts are the partition actors by partition id; nil where this node
	// holds no replica of the partition. One is set later when the node
	// gains a replica (repair), so they are read atomically.
	parts []atomic.Pointer[actor.PID]
	// leads[i]: this node's actor of partition i was last told it leads,
	// which routes publishes and subscriptions. It is kept here and not in
	// the cluster view: it changes in step with the RoleChanged sent to that
	// actor and with the subscriptions that follow it, it belongs to this
	// incarnation of the topic, and ephemeral topics and nodes without etcd,
	// which no watch describes, have it too.
	leads []atomic.Bool

	// settings are read without a lock; settingsMu orders their changes
	// with the copies sent to partition actors.
	settings   atomic.Pointer[Settings]
	settingsMu sync.Mutex

	rr        atomic.Uint64
	mu        sync.RWMutex
	channels  map[string]bool
	consumers map[string]int // subscribed connections per channel
	subs      map[*Subscription]bool
	paused    atomic.Bool
	// ext: messages may carry JSON headers (youzan's extend). It only ever
	// turns on, when the topic is upgraded.
	ext atomic.Bool

	// life is held for reading while a publish is handed to a partition
	// actor, and for writing to mark the topic deleted, so no publish is sent
	// to an actor that has stopped: its reply would never come.
	life    sync.RWMutex
	deleted bool

	dropOnce    sync.Once
	incarnation uint64
	created     int64 // TopicMeta.CreatedUnixNano of this incarnation
}

// Ext reports whether the topic's messages may carry JSON headers.
func (t *Topic) Ext() bool { return t.ext.Load() }

// NumPartitions is the topic's partition count, cluster-wide.
func (t *Topic) NumPartitions() int { return len(t.parts) }

// Partition is the actor of partition p on this node, or nil.
func (t *Topic) Partition(p int) *actor.PID {
	if p < 0 || p >= len(t.parts) {
		return nil
	}
	return t.parts[p].Load()
}

// pick returns the partition to write: the one asked for, or round-robin
// over the partitions this node leads.
func (t *Topic) pick(partition int) (int, *actor.PID) {
	if partition >= len(t.parts) {
		return partition, nil
	}
	if partition >= 0 {
		if !t.leads[partition].Load() {
			return partition, nil
		}
		return partition, t.Partition(partition)
	}
	n := len(t.parts)
	start := 0
	if n > 1 {
		start = int(t.rr.Add(1) % uint64(n))
	}
	for i := 0; i < n; i++ {
		p := (start + i) % n
		if t.leads[p].Load() {
			return p, t.Partition(p)
		}
	}
	return -1, nil
}

// Leads reports whether this node leads partition p.
func (t *Topic) Leads(p int) bool { return p >= 0 && p < len(t.leads) && t.leads[p].Load() }

// hosted lists the partition actors on this node.
func (t *Topic) hosted() []*actor.PID {
	out := make([]*actor.PID, 0, len(t.parts))
	for i := range t.parts {
		if pid := t.parts[i].Load(); pid != nil {
			out = append(out, pid)
		}
	}
	return out
}

// HasChannel reports whether the channel exists.
func (t *Topic) HasChannel(name string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.channels[name]
}

// ChannelNames lists the channels, sorted.
func (t *Topic) ChannelNames() []string {
	t.mu.RLock()
	out := make([]string, 0, len(t.channels))
	for n := range t.channels {
		out = append(out, n)
	}
	t.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Paused reports whether the topic is paused.
func (t *Topic) Paused() bool { return t.paused.Load() }

// channelPIDs starts the channel on every partition and returns its actors.
func (t *Topic) channelPIDs(system *actor.ActorSystem, name string) ([]*actor.PID, error) {
	pids := make([]*actor.PID, len(t.parts))
	for i := range t.parts {
		p := t.parts[i].Load()
		if p == nil {
			continue
		}
		res, err := system.Root.RequestFuture(p, &topic.ChannelWanted{Name: name}, 10*time.Second).Result()
		if err != nil {
			return nil, fmt.Errorf("opening channel %s on %s/%d: %w", name, t.Name, i, err)
		}
		ready := res.(*topic.ChannelReady)
		if ready.PID == nil {
			return nil, fmt.Errorf("opening channel %s on %s/%d failed", name, t.Name, i)
		}
		pids[i] = ready.PID
	}
	t.mu.Lock()
	t.channels[name] = true
	t.mu.Unlock()
	return pids, nil
}

// sendAll sends msg to the channel's actor on every partition.
func (t *Topic) sendAll(system *actor.ActorSystem, name string, msg any) {
	pids, err := t.channelPIDs(system, name)
	if err != nil {
		return
	}
	for _, pid := range pids {
		if pid != nil {
			system.Root.Send(pid, msg)
		}
	}
}

func (t *Topic) pause(system *actor.ActorSystem, paused bool) {
	t.paused.Store(paused)
	for _, p := range t.hosted() {
		system.Root.Send(p, &topic.PauseChanged{Paused: paused})
	}
}

// setDeleted marks the topic deleted (or not, when deleting failed) and
// reports whether that changed anything.
func (t *Topic) setDeleted(deleted bool) bool {
	t.life.Lock()
	defer t.life.Unlock()
	changed := t.deleted != deleted
	t.deleted = deleted
	return changed
}

func (t *Topic) isDeleted() bool {
	t.life.RLock()
	defer t.life.RUnlock()
	return t.deleted
}
