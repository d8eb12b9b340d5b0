package broker

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/storage"
)

// Topic is a topic as the node's sessions see it: its partition actors and
// the names of its channels.
type Topic struct {
	Name      string
	Ephemeral bool
	Replicas  int
	Ordered   bool // consumed only with SUB_ORDERED
	// slots are this node's replicas by partition id, one per partition of
	// the topic. An expand replaces the list with a longer one sharing the
	// slots it had, so it is read atomically and never changed in place.
	slots atomic.Pointer[[]*replicaSlot]

	// settings are read without a lock; settingsMu orders their changes
	// with the copies sent to partition actors.
	settings   atomic.Pointer[Settings]
	settingsMu sync.Mutex

	rr        atomic.Uint64
	mu        sync.RWMutex
	channels  map[string]bool
	consumers map[string]int // subscribed connections per channel
	subs      map[*Subscription]bool
	// drops counts each channel's drops on this node: a subscription that
	// saw one while it opened the channel opens it again (Subscribe).
	drops map[string]uint64
	// ephemeralLimits are the client limits of ephemeral channels, which
	// the metadata does not hold.
	ephemeralLimits map[string][]cluster.ClientLimit
	// flagsMu orders what the channels' actors are told of their stored
	// flags and limits, and flagRev is the latest revision told, by
	// channel (applyChannelMeta).
	flagsMu sync.Mutex
	flagRev map[string]int64
	paused  atomic.Bool
	// ext: messages may carry JSON headers (youzan's extend). It only ever
	// turns on, when the topic is upgraded.
	ext atomic.Bool

	// life is held for reading while a publish is handed to a partition
	// actor, and for writing to mark the topic deleted, so no publish is sent
	// to an actor that has stopped: its reply would never come.
	life    sync.RWMutex
	deleted bool

	dropOnce sync.Once
	// closing: an ephemeral topic whose last channel went is on its way
	// out; a subscription no longer counts itself in (under mu), and a
	// creation waits for dropped, closed once the topic is gone, to make it
	// anew.
	closing     bool
	dropped     chan struct{}
	incarnation uint64
	created     int64 // TopicMeta.CreatedUnixNano of this incarnation
}

// Ext reports whether the topic's messages may carry JSON headers.
func (t *Topic) Ext() bool { return t.ext.Load() }

// replicaSlot is this node's part in one partition of the topic.
type replicaSlot struct {
	// pid is the partition's actor; nil while this node holds no replica
	// of the partition. It is set later when the node gains a replica
	// (repair, expand), so it is read atomically.
	pid atomic.Pointer[actor.PID]
	// store is the actor's storage, set with pid, for what may be read
	// of it from outside the actor (its commit log's End).
	store atomic.Pointer[storage.Partition]
	// leads: the actor was last told it leads, which routes publishes and
	// subscriptions. It is kept here and not in the cluster view: it
	// changes in step with the RoleChanged sent to that actor and with the
	// subscriptions that follow it, it belongs to this incarnation of the
	// topic, and ephemeral topics and nodes without etcd, which no watch
	// describes, have it too.
	leads atomic.Bool
	// moves counts the changes of leads. A subscription asks the partition
	// for its channel when this node starts leading it and is attached when
	// the answer comes: only if moves is still what it was when it asked,
	// so a late answer never attaches it under a leadership that ended.
	moves atomic.Uint64
	// changed, once asked for (changes), is closed when leads changes.
	changed atomic.Pointer[chan struct{}]
}

// lead records whether this node leads the partition and reports whether
// that changed; the caller holds roleMu.
func (s *replicaSlot) lead(leads bool) bool {
	if s.leads.Swap(leads) == leads {
		return false
	}
	s.moves.Add(1)
	if ch := s.changed.Swap(nil); ch != nil {
		close(*ch)
	}
	return true
}

// changes is closed by the next change of leads: read leads after it.
func (s *replicaSlot) changes() <-chan struct{} {
	for {
		if ch := s.changed.Load(); ch != nil {
			return *ch
		}
		ch := make(chan struct{})
		if s.changed.CompareAndSwap(nil, &ch) {
			return ch
		}
	}
}

func newSlots(n int) *[]*replicaSlot {
	slots := make([]*replicaSlot, n)
	for i := range slots {
		slots[i] = &replicaSlot{}
	}
	return &slots
}

// replicas is the topic's slots as they are now.
func (t *Topic) replicas() []*replicaSlot { return *t.slots.Load() }

// slot is partition p's slot, or nil beyond the topic's partitions.
func (t *Topic) slot(p int) *replicaSlot {
	slots := t.replicas()
	if p < 0 || p >= len(slots) {
		return nil
	}
	return slots[p]
}

// grow gives the topic partitions up to n (an expand); it never shrinks.
// The caller serialises growing.
func (t *Topic) grow(n int) bool {
	slots := t.replicas()
	if n <= len(slots) {
		return false
	}
	next := append(slices.Clone(slots), *newSlots(n - len(slots))...)
	t.slots.Store(&next)
	return true
}

// NumPartitions is the topic's partition count, cluster-wide.
func (t *Topic) NumPartitions() int { return len(t.replicas()) }

// Partition is the actor of partition p on this node, or nil.
func (t *Topic) Partition(p int) *actor.PID {
	if s := t.slot(p); s != nil {
		return s.pid.Load()
	}
	return nil
}

// pick returns the partition to write: the one asked for, or round-robin
// over the partitions this node leads.
func (t *Topic) pick(partition int) (int, *actor.PID) {
	slots := t.replicas()
	if partition >= len(slots) {
		return partition, nil
	}
	if partition >= 0 {
		if !slots[partition].leads.Load() {
			return partition, nil
		}
		return partition, slots[partition].pid.Load()
	}
	n := len(slots)
	start := 0
	if n > 1 {
		start = int(t.rr.Add(1) % uint64(n))
	}
	for i := 0; i < n; i++ {
		p := (start + i) % n
		if slots[p].leads.Load() {
			return p, slots[p].pid.Load()
		}
	}
	return -1, nil
}

// ledElsewhere picks, round robin, a partition this node does not lead.
func (t *Topic) ledElsewhere() (int, bool) {
	slots := t.replicas()
	n := len(slots)
	start := int(t.rr.Add(1) % uint64(max(n, 1)))
	for i := range n {
		if p := (start + i) % n; !slots[p].leads.Load() {
			return p, true
		}
	}
	return 0, false
}

// Leads reports whether this node leads partition p.
func (t *Topic) Leads(p int) bool {
	s := t.slot(p)
	return s != nil && s.leads.Load()
}

// leadership is whether this node leads partition p and the count of its
// changes a subscription attaches under (replicaSlot.moves). The count is
// read first: lead changes it after leads, so a leadership seen here that
// has already moved on fails the attach, and one that moves on later
// detaches what was attached.
func (t *Topic) leadership(p int32) (leads bool, moves uint64) {
	s := t.slot(int(p))
	if s == nil {
		return false, 0
	}
	moves = s.moves.Load()
	return s.leads.Load(), moves
}

// hosted lists the partition actors on this node.
func (t *Topic) hosted() []*actor.PID {
	slots := t.replicas()
	out := make([]*actor.PID, 0, len(slots))
	for _, s := range slots {
		if pid := s.pid.Load(); pid != nil {
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
	pids, err := t.openChannel(system, name, channelWait)
	if err != nil {
		return nil, err
	}
	return pids, nil
}

// openChannel asks every partition here for the channel at once and waits
// up to wait for the answers: a partition slow to answer (its mailbox full
// after a failover, say) costs its own wait, not the sum of all of them.
// It returns the actors of the partitions that answered, nil for the
// others, and the first failure; a partition that did not answer in time
// fails with an error wrapping actor.ErrTimeout, and still opens the
// channel when it reads the request.
func (t *Topic) openChannel(system *actor.ActorSystem, name string, wait time.Duration) ([]*actor.PID, error) {
	slots := t.replicas()
	asked := make([]*actor.Future, len(slots))
	for i, s := range slots {
		if p := s.pid.Load(); p != nil {
			asked[i] = system.Root.RequestFuture(p, &topic.ChannelWanted{Name: name}, wait)
		}
	}
	pids := make([]*actor.PID, len(slots))
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	for i, f := range asked {
		if f == nil {
			continue
		}
		res, err := t.await(f)
		if errors.Is(err, errTopicDropped) {
			return pids, err
		}
		if err != nil {
			fail(fmt.Errorf("opening channel %s on %s/%d: %w", name, t.Name, i, err))
			continue
		}
		if ready, ok := res.(*topic.ChannelReady); ok && ready.PID != nil {
			pids[i] = ready.PID
			continue
		}
		fail(fmt.Errorf("opening channel %s on %s/%d failed", name, t.Name, i))
	}
	// The channel is here once any partition has it; one that did not
	// answer yet opens it when it reads the request.
	if first == nil || slices.ContainsFunc(pids, func(p *actor.PID) bool { return p != nil }) {
		t.mu.Lock()
		t.channels[name] = true
		t.mu.Unlock()
	}
	return pids, first
}

// errTopicDropped: a request to one of the topic's partitions was given up
// on because the topic went away; the partition stopping may have dropped
// it unanswered.
var errTopicDropped = errors.New("the topic was deleted")

// ask is RequestFuture to a partition of t, given up on as soon as t is
// dropped (await).
func (t *Topic) ask(system *actor.ActorSystem, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	return t.await(system.Root.RequestFuture(pid, msg, timeout))
}

// await waits for a partition's answer, or until t is dropped: an actor
// drops the requests still in its mailbox when it stops, and the asker
// would wait out the timeout.
func (t *Topic) await(f *actor.Future) (any, error) {
	if t.dropped == nil {
		return f.Result()
	}
	type answer struct {
		res any
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := f.Result()
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		return a.res, a.err
	case <-t.dropped:
		return nil, errTopicDropped
	}
}

// sendAll sends msg to the channel's actor on every partition.
func (t *Topic) sendAll(system *actor.ActorSystem, name string, msg any) {
	// Those that answered get it even if another did not: a partition
	// slow to answer must not keep the change from all of them.
	pids, _ := t.openChannel(system, name, channelWait)
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

func (t *Topic) isClosing() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.closing
}

func (t *Topic) isDeleted() bool {
	t.life.RLock()
	defer t.life.RUnlock()
	return t.deleted
}
