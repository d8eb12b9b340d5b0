package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PartitionState is who replicates a partition and who may write to it.
//
// Leader is in ISR whenever it is set. EpochForWrite grows only when the
// leader changes or a node joins the ISR; ISR removals keep it. Revision is
// not stored: it is the key's etcd ModRevision when the state was read, and
// the token CompareAndSwap checks.
type PartitionState struct {
	Topic         string
	Partition     int32
	Leader        string
	ISR           []string
	Catchup       []string
	EpochForWrite int64
	// LeaderSession names the present leadership (Leadership); "" when
	// there is no leader, or for a state written before it was kept.
	LeaderSession string
	Replicas      int32
	WriteDisabled bool // the leader failed a write and takes none for now
	// Preferred is the replica the leader balance gives leadership back to
	// (docs/replication.md#preferred-replica); "" for none.
	Preferred string
	Move      Move // a replica move under way, carried out by the controller
	Revision  int64
}

// Leadership names a leadership: the leader and the EpochForWrite it began
// in. Epochs only grow, so no two leaderships of a partition share one.
func Leadership(leader string, epoch int64) string {
	return leader + "@" + strconv.FormatInt(epoch, 10)
}

// LeadershipEpoch is the EpochForWrite the leadership named by session
// began in; 0 for none or a name it cannot read.
func LeadershipEpoch(session string) int64 {
	i := strings.LastIndexByte(session, '@')
	if i < 0 {
		return 0
	}
	e, err := strconv.ParseInt(session[i+1:], 10, 64)
	if err != nil || e < 0 {
		return 0
	}
	return e
}

var (
	ErrConflict          = errors.New("partition state changed concurrently")
	ErrPartitionNotFound = errors.New("partition not found")
	ErrISRTooSmall       = errors.New("ISR would no longer hold a majority of the replicas")
)

// maxSwapAttempts bounds ShrinkISR's read-check-swap loop. Every failed
// attempt means another writer succeeded, so only a storm of writers on one
// partition runs out.
const maxSwapAttempts = 10

// rewatchDelay is the pause before following a prefix again after etcd
// broke the watch or refused to list, so an unhealthy member is not hammered.
const rewatchDelay = 200 * time.Millisecond

// Assignments keeps the replication state of every partition in etcd:
//
//	<prefix>partitions/<topic>/<partition>   PartitionState
//
// Every change is a compare-and-swap on the key's ModRevision, so two
// writers acting on the same state never both win.
type Assignments struct {
	cli    *clientv3.Client
	prefix string
}

func NewAssignments(cli *clientv3.Client, prefix string) *Assignments {
	return &Assignments{cli: cli, prefix: keyPrefix(prefix)}
}

// keyPrefix applies the defaults NewMetaStore applies, so every store of a
// node shares one root.
func keyPrefix(prefix string) string {
	if prefix == "" {
		prefix = DefaultMetaPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return prefix
}

func (a *Assignments) partitionsPrefix() string { return a.prefix + "partitions/" }

func (a *Assignments) topicPrefix(topic string) string {
	return a.partitionsPrefix() + topic + "/"
}

func (a *Assignments) key(topic string, partition int32) string {
	return a.topicPrefix(topic) + strconv.FormatInt(int64(partition), 10)
}

// parseKey is key's inverse; ok is false for keys it did not make.
func (a *Assignments) parseKey(key string) (topic string, partition int32, ok bool) {
	rest, ok := strings.CutPrefix(key, a.partitionsPrefix())
	if !ok {
		return "", 0, false
	}
	topic, num, ok := strings.Cut(rest, "/")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil {
		return "", 0, false
	}
	return topic, int32(n), true
}

// Create stores st unless the partition already has a state; then the
// stored one is returned with created == false. st.Revision is ignored.
func (a *Assignments) Create(ctx context.Context, st PartitionState) (stored PartitionState, created bool, err error) {
	if err := validPartitionState(st); err != nil {
		return PartitionState{}, false, fmt.Errorf("create partition state: %w", err)
	}
	val, err := marshalPartition(st)
	if err != nil {
		return PartitionState{}, false, fmt.Errorf("create %s: %w", partitionName(st.Topic, st.Partition), err)
	}
	key := a.key(st.Topic, st.Partition)
	resp, err := a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return PartitionState{}, false, fmt.Errorf("create %s: %w", partitionName(st.Topic, st.Partition), err)
	}
	if resp.Succeeded {
		// Decoding what was written gives the same shape Get returns
		// (nil rather than empty lists).
		stored, err := unmarshalPartition(val, resp.Header.Revision)
		return stored, true, err
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return PartitionState{}, false, fmt.Errorf("create %s: key %s existed but could not be read", partitionName(st.Topic, st.Partition), key)
	}
	stored, err = decodePartition(kvs[0])
	return stored, false, err
}

// CreateAll stores every state of states whose partition has none, up to
// maxTxnPartitions in one etcd transaction: a topic of 1,000 partitions is
// placed in 8 round trips, not 1,000. A chunk in which some partition
// already has a state (two nodes creating one topic at once) is stored one
// by one, as Create does.
func (a *Assignments) CreateAll(ctx context.Context, states []PartitionState) error {
	for start := 0; start < len(states); start += maxTxnPartitions {
		chunk := states[start:min(start+maxTxnPartitions, len(states))]
		created, err := a.createChunk(ctx, chunk)
		if err != nil {
			return err
		}
		if created {
			continue
		}
		for _, st := range chunk {
			if _, _, err := a.Create(ctx, st); err != nil {
				return err
			}
		}
	}
	return nil
}

// createChunk stores states in one transaction if none of them exists yet.
func (a *Assignments) createChunk(ctx context.Context, states []PartitionState) (bool, error) {
	cmps := make([]clientv3.Cmp, 0, len(states))
	puts := make([]clientv3.Op, 0, len(states))
	for _, st := range states {
		if err := validPartitionState(st); err != nil {
			return false, fmt.Errorf("create partition state: %w", err)
		}
		val, err := marshalPartition(st)
		if err != nil {
			return false, fmt.Errorf("create %s: %w", partitionName(st.Topic, st.Partition), err)
		}
		key := a.key(st.Topic, st.Partition)
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		puts = append(puts, clientv3.OpPut(key, string(val)))
	}
	resp, err := a.cli.Txn(ctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, fmt.Errorf("create %d partition states of %s: %w", len(states), states[0].Topic, err)
	}
	return resp.Succeeded, nil
}

// Get returns the partition's state and whether it exists.
func (a *Assignments) Get(ctx context.Context, topic string, partition int32) (PartitionState, bool, error) {
	if err := validPartition(topic, partition); err != nil {
		return PartitionState{}, false, err
	}
	resp, err := a.cli.Get(ctx, a.key(topic, partition))
	if err != nil {
		return PartitionState{}, false, fmt.Errorf("get %s: %w", partitionName(topic, partition), err)
	}
	if len(resp.Kvs) == 0 {
		return PartitionState{}, false, nil
	}
	st, err := decodePartition(resp.Kvs[0])
	return st, err == nil, err
}

// List returns the states of the topic's partitions, or of every topic's
// when topic is "", sorted by topic then partition.
func (a *Assignments) List(ctx context.Context, topic string) ([]PartitionState, error) {
	prefix := a.partitionsPrefix()
	if topic != "" {
		if err := validName("topic", topic); err != nil {
			return nil, err
		}
		prefix = a.topicPrefix(topic)
	}
	resp, err := a.cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("list partition states: %w", err)
	}
	states := make([]PartitionState, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		st, err := decodePartition(kv)
		if err != nil {
			return nil, err
		}
		states = append(states, st)
	}
	sortPartitions(states)
	return states, nil
}

// CompareAndSwap stores st if the partition's state is still the one read
// at st.Revision, and returns it with its new Revision. Otherwise it
// returns ErrConflict (also ErrPartitionNotFound if the state was deleted)
// together with the state stored now, so the caller can re-check and retry
// without reading again.
func (a *Assignments) CompareAndSwap(ctx context.Context, st PartitionState) (PartitionState, error) {
	if err := validPartitionState(st); err != nil {
		return PartitionState{}, fmt.Errorf("swap partition state: %w", err)
	}
	name := partitionName(st.Topic, st.Partition)
	if st.Revision <= 0 {
		return PartitionState{}, fmt.Errorf("swap %s: revision %d was not read from etcd; use Create for a new partition", name, st.Revision)
	}
	val, err := marshalPartition(st)
	if err != nil {
		return PartitionState{}, fmt.Errorf("swap %s: %w", name, err)
	}
	key := a.key(st.Topic, st.Partition)
	resp, err := a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", st.Revision)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return PartitionState{}, fmt.Errorf("swap %s: %w", name, err)
	}
	if resp.Succeeded {
		return unmarshalPartition(val, resp.Header.Revision)
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return PartitionState{}, fmt.Errorf("swap %s at revision %d: %w: %w", name, st.Revision, ErrConflict, ErrPartitionNotFound)
	}
	current, err := decodePartition(kvs[0])
	if err != nil {
		return PartitionState{}, err
	}
	return current, fmt.Errorf("swap %s at revision %d: now at %d: %w", name, st.Revision, current.Revision, ErrConflict)
}

// ShrinkISR is the leader dropping followers that fell behind: they move
// from the ISR to Catchup and EpochForWrite stays, so writes go on without
// them. Nodes already out of the ISR are ignored. It is refused with
// ErrConflict when leader no longer leads, and with ErrISRTooSmall when the
// ISR left would not be a majority of Replicas. A concurrent change makes
// it re-read and re-check, a bounded number of times.
func (a *Assignments) ShrinkISR(ctx context.Context, topic string, partition int32, leader string, remove []string) (PartitionState, error) {
	if err := validPartition(topic, partition); err != nil {
		return PartitionState{}, err
	}
	if leader == "" {
		return PartitionState{}, fmt.Errorf("shrink ISR of %s: empty leader", partitionName(topic, partition))
	}
	return a.change(ctx, ShrinkISRChange(PartitionRef{topic, partition}, leader, remove))
}

// change applies one leader change, as ChangeAll does.
func (a *Assignments) change(ctx context.Context, ch LeaderChange) (PartitionState, error) {
	res := a.ChangeAll(ctx, []LeaderChange{ch})[0]
	return res.Stored, res.Err
}

// shrunk is st with remove moved from the ISR to Catchup; changed is false
// when none of them was in the ISR.
func shrunk(st PartitionState, leader string, remove []string) (next PartitionState, changed bool, err error) {
	if st.Leader != leader {
		return st, false, fmt.Errorf("%q is not the leader (leader is %q): %w", leader, st.Leader, ErrConflict)
	}
	next = st
	next.ISR = nil
	next.Catchup = slices.Clone(st.Catchup)
	for _, node := range st.ISR {
		if !slices.Contains(remove, node) {
			next.ISR = append(next.ISR, node)
			continue
		}
		if !slices.Contains(next.Catchup, node) {
			next.Catchup = append(next.Catchup, node)
		}
	}
	if len(next.ISR) == len(st.ISR) {
		return st, false, nil
	}
	if int32(len(next.ISR)) <= st.Replicas/2 {
		return st, false, fmt.Errorf("%d of %d replicas would be left in sync: %w", len(next.ISR), st.Replicas, ErrISRTooSmall)
	}
	return next, true, nil
}

// Delete removes the state of every partition of topic.
func (a *Assignments) Delete(ctx context.Context, topic string) error {
	if err := validName("topic", topic); err != nil {
		return err
	}
	if _, err := a.cli.Delete(ctx, a.topicPrefix(topic), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("delete partition states of topic %q: %w", topic, err)
	}
	return nil
}

// Watch emits the current state of every partition of topic (every topic
// when topic is ""), sorted, then each change in the order etcd applied it.
// States come in batches: the listed states in one, then the states of
// each watch response (a transaction's, or several) in one, so a consumer
// applies a failover's thousands of elections in tens of steps rather
// than handing states over one by one, each waiting for a busy node's
// scheduler. A deleted partition is emitted as a state holding only Topic
// and Partition: Leader is "" and Revision is 0. When etcd compacted away
// changes the watch still needed, the current states are emitted again,
// preceded by deletions for partitions that vanished meanwhile, so a
// consumer may see a state twice but never misses the latest. Values that
// cannot be decoded are skipped. The channel is closed when ctx ends or
// the client is closed, and at once for an invalid topic name.
func (a *Assignments) Watch(ctx context.Context, topic string) <-chan []PartitionState {
	out := make(chan []PartitionState)
	prefix := a.partitionsPrefix()
	if topic != "" {
		if validName("topic", topic) != nil {
			close(out)
			return out
		}
		prefix = a.topicPrefix(topic)
	}
	w := &partitionWatch{a: a, ctx: ctx, out: out, known: map[string]bool{}}
	go func() {
		defer close(out)
		followPrefix(ctx, a.cli, prefix, w.reset, w.change)
	}()
	return out
}

// partitionWatch remembers which keys it has emitted, to report the ones
// that disappear while it was not watching.
type partitionWatch struct {
	a     *Assignments
	ctx   context.Context
	out   chan<- []PartitionState
	known map[string]bool
}

func (w *partitionWatch) reset(kvs []*mvccpb.KeyValue) bool {
	gone := w.known
	w.known = make(map[string]bool, len(kvs))
	var states []PartitionState
	for _, kv := range kvs {
		delete(gone, string(kv.Key))
		if st, err := decodePartition(kv); err == nil {
			w.known[string(kv.Key)] = true
			states = append(states, st)
		}
	}
	for key := range gone {
		if st, ok := w.deleted(key); ok {
			states = append(states, st)
		}
	}
	sortPartitions(states)
	return w.send(states)
}

func (w *partitionWatch) change(events []*clientv3.Event) bool {
	states := make([]PartitionState, 0, len(events))
	for _, ev := range events {
		key := string(ev.Kv.Key)
		if ev.Type == mvccpb.DELETE {
			delete(w.known, key)
			if st, ok := w.deleted(key); ok {
				states = append(states, st)
			}
			continue
		}
		if st, err := decodePartition(ev.Kv); err == nil {
			w.known[key] = true
			states = append(states, st)
		}
	}
	return w.send(states)
}

func (w *partitionWatch) deleted(key string) (PartitionState, bool) {
	topic, partition, ok := w.a.parseKey(key)
	return PartitionState{Topic: topic, Partition: partition}, ok
}

func (w *partitionWatch) send(states []PartitionState) bool {
	if len(states) == 0 {
		return true
	}
	select {
	case w.out <- states:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// followPrefix hands reset every key under prefix, then hands change each
// batch of later events, until ctx ends, the client is closed, or a
// callback returns false. When the watch breaks — etcd compacted revisions
// it still needed, the member lost its leader, the connection dropped — it
// lists again and calls reset once more, so reset must cope with keys it
// has already seen.
func followPrefix(ctx context.Context, cli *clientv3.Client, prefix string,
	reset func([]*mvccpb.KeyValue) bool, change func([]*clientv3.Event) bool) {
	for ctx.Err() == nil && cli.Ctx().Err() == nil {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			pause(ctx, rewatchDelay)
			continue
		}
		if !reset(resp.Kvs) {
			return
		}
		stopped, compacted := watchChanges(ctx, cli, prefix, resp.Header.Revision+1, change)
		if stopped {
			return
		}
		if !compacted {
			pause(ctx, rewatchDelay)
		}
	}
}

// watchChanges feeds change the events under prefix from revision rev on
// until the watch ends; stopped reports that change asked to stop, and
// compacted that etcd no longer holds the revisions needed to go on.
func watchChanges(ctx context.Context, cli *clientv3.Client, prefix string, rev int64,
	change func([]*clientv3.Event) bool) (stopped, compacted bool) {
	// Without a leader the member's view may be stale; cancelling the
	// watch then makes us list again from a member that has one.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if resp.CompactRevision != 0 {
			return false, true
		}
		if resp.Err() != nil {
			return false, false
		}
		if len(resp.Events) > 0 && !change(resp.Events) {
			return true, false
		}
	}
	return false, false
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func decodePartition(kv *mvccpb.KeyValue) (PartitionState, error) {
	st, err := unmarshalPartition(kv.Value, kv.ModRevision)
	if err != nil {
		return PartitionState{}, fmt.Errorf("decode partition state at %s: %w", kv.Key, err)
	}
	return st, nil
}

func sortPartitions(states []PartitionState) {
	slices.SortFunc(states, func(x, y PartitionState) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
}

func partitionName(topic string, partition int32) string {
	return fmt.Sprintf("partition %q/%d", topic, partition)
}

func validPartition(topic string, partition int32) error {
	if err := validName("topic", topic); err != nil {
		return err
	}
	if partition < 0 {
		return fmt.Errorf("invalid partition %d of topic %q: must not be negative", partition, topic)
	}
	return nil
}

// validPartitionState refuses states no writer should store: a leader
// outside the ISR, a node both in sync and catching up, nameless nodes.
func validPartitionState(st PartitionState) error {
	if err := validPartition(st.Topic, st.Partition); err != nil {
		return err
	}
	name := partitionName(st.Topic, st.Partition)
	if st.Replicas < 1 {
		return fmt.Errorf("%s: replicas must be at least 1, got %d", name, st.Replicas)
	}
	if st.EpochForWrite < 0 {
		return fmt.Errorf("%s: negative epoch for write %d", name, st.EpochForWrite)
	}
	seen := make(map[string]bool, len(st.ISR)+len(st.Catchup))
	for _, node := range slices.Concat(st.ISR, st.Catchup) {
		if node == "" {
			return fmt.Errorf("%s: empty node ID in ISR or catchup list", name)
		}
		if seen[node] {
			return fmt.Errorf("%s: node %q listed twice in ISR and catchup list", name, node)
		}
		seen[node] = true
	}
	if st.Leader != "" && !slices.Contains(st.ISR, st.Leader) {
		return fmt.Errorf("%s: leader %q is not in the ISR %v", name, st.Leader, st.ISR)
	}
	if err := st.Move.valid(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// LeaveISR moves a follower that restarted from the ISR to catch-up
// (docs/replication.md#restart-follower-leaves-isr): what it has on disk may
// lack writes it acknowledged before it stopped, so it rejoins only once the
// leader caught it up. It is refused with ErrISRTooSmall when the ISR left
// would not be a majority of the replicas, and the leader cannot leave this
// way.
func (a *Assignments) LeaveISR(ctx context.Context, topic string, partition int32, node string) (PartitionState, error) {
	current, found, err := a.Get(ctx, topic, partition)
	if err != nil {
		return PartitionState{}, err
	}
	if !found {
		return PartitionState{}, fmt.Errorf("leave ISR of %s: %w", partitionName(topic, partition), ErrPartitionNotFound)
	}
	if current.Leader == node {
		return current, fmt.Errorf("leave ISR of %s: %q leads it; a new leader must be elected", partitionName(topic, partition), node)
	}
	// A partition whose leader resigned has none until the controller
	// elects one; leaving it then keeps the restarted node from being
	// elected on what it kept.
	return a.change(ctx, ShrinkISRChange(PartitionRef{topic, partition}, current.Leader, []string{node}))
}

// ResignLeadership leaves a partition without a leader for the controller
// to elect the member with the most data: a leader that restarted may have
// lost writes its followers hold (fsync is every --sync-every commits), and
// must not lead them on what it has. It also leaves the ISR for Catchup, as
// a restarted follower does, unless the ISR left would not be a majority.
func (a *Assignments) ResignLeadership(ctx context.Context, topic string, partition int32, leader string) (PartitionState, error) {
	return a.change(ctx, LeaderChange{Ref: PartitionRef{topic, partition}, Leader: leader, What: "resign leadership of", Apply: func(st *PartitionState) error {
		st.Leader, st.LeaderSession = "", ""
		next, changed, err := shrunk(*st, "", []string{leader})
		if changed && err == nil {
			*st = next
		}
		return nil
	}})
}

// DisableWrites records that the partition's leader failed a write and
// takes none until it re-enables them. Only the leader asks.
func (a *Assignments) DisableWrites(ctx context.Context, topic string, partition int32, leader string) (PartitionState, error) {
	return a.change(ctx, DisableWritesChange(PartitionRef{topic, partition}, leader))
}

// ReenableWrites increments a partition's EpochForWrite, its ISR and leader
// unchanged, and clears WriteDisabled: a leader that disabled its writes
// after failing one takes writes again only through this change, so every
// member of its ISR fences what was in flight before. Only the leader asks.
func (a *Assignments) ReenableWrites(ctx context.Context, topic string, partition int32, leader string) (PartitionState, error) {
	return a.change(ctx, ReenableWritesChange(PartitionRef{topic, partition}, leader))
}

var errUnchanged = errors.New("nothing to change")

// JoinISR moves a caught-up node from Catchup into the ISR; only the
// partition's leader asks, having sent the node everything it committed and
// with no write in flight. EpochForWrite is incremented
// (docs/replication.md#isr-join), so every member of the new ISR takes only
// writes made after the change.
func (a *Assignments) JoinISR(ctx context.Context, topic string, partition int32, leader, node string) (PartitionState, error) {
	return a.change(ctx, JoinISRChange(PartitionRef{topic, partition}, leader, node))
}
