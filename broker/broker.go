// Package broker is a node's registry of topics: it opens each partition's
// store, starts its partition actor, keeps topic metadata in etcd, and gives
// sessions and HTTP handlers what they need to publish and subscribe. It
// holds no message state itself; the actors do.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Config is what the node's flags decide for every topic.
type Config struct {
	DataPath          string
	DefaultPartitions int
	DefaultReplicas   int
	Storage           storage.Options
	Writer            topic.WriterConfig
	Channel           channel.Config
	PersistEvery      time.Duration
	// States saves the channels' states, batched (storage.ChannelStates);
	// nil saves each at once.
	States *storage.ChannelStates
	// Retention and RetentionEvery: what confirmed data each partition
	// deletes, and how often it looks.
	Retention      storage.RetentionPolicy
	RetentionEvery time.Duration
	// Dedupe is the node's dedupe window (--dedupe-window, which a topic's
	// dedupe_window replaces) and per-partition cap (--dedupe-max-entries).
	Dedupe topic.DedupeConfig
	// MaxChannelConsumers caps the connections subscribed to one channel on
	// this node; 0 is no cap.
	MaxChannelConsumers int
	// MaxTopics caps the topics this node serves: creating one more
	// fails with ErrTooManyTopics; 0 is no cap.
	MaxTopics int
	// MaxAttempts is the max_attempts a channel is created with when its
	// creation names none (--max-attempts); 0 is none.
	MaxAttempts uint16
	Logger      *slog.Logger
	// Replication: this node's ID, where partition states live, and how
	// to reach followers. With a nil Assignments every partition is led
	// here with an ISR of this node alone.
	NodeID      string
	Assignments *cluster.Assignments
	Etcd        *clientv3.Client
	MetaPrefix  string
	Dial        replica.Dialer
	// OutOfReach: topic.Options.OutOfReach.
	OutOfReach func(node string) replica.Unreachable
	// Attach: topic.Options.Attach.
	Attach replica.Attacher
	// FramesInFlight: frames of writes a follower may leave unanswered
	// per partition (topic.Options.FramesInFlight).
	FramesInFlight int
	// ReplicaRedialMax: the wait between a leader's attempts to reach a
	// follower once an early one failed (topic.Options.RedialMax).
	ReplicaRedialMax time.Duration
	// ForwardTimeout bounds a publish forwarded to another node's leader;
	// MaxClockSkew is how far apart the nodes' clocks may be, and how much
	// earlier than the give-up the leader stops writing it (forward.go).
	// Zero takes DefaultForwardTimeout and DefaultMaxClockSkew.
	ForwardTimeout time.Duration
	MaxClockSkew   time.Duration
	// ForwardMoveGrace: how long a forward in flight to a leader still
	// registered waits for its answer once its leadership moved
	// (endWithLeadership); zero fails it at once.
	ForwardMoveGrace time.Duration
	// CatchupLimit paces every catch-up push of this node
	// (topic.Options.CatchupLimit).
	CatchupLimit *topic.CatchupLimit
	// Admission bounds the publishes this node takes and has not answered
	// (admission.go); a zero Max takes every publish.
	Admission AdmissionConfig
	// ChannelWait bounds how long a partition this node starts leading may
	// take to open a subscription's channel before the attacher asks
	// again; SubOpenWait how long a SUB waits for the partitions here
	// before it answers and leaves the slow ones to the attacher. Zero
	// takes 10 s and 2 s.
	ChannelWait time.Duration
	SubOpenWait time.Duration
	// ObservePublish, if set, gets every publish's latency.
	ObservePublish func(topic string, partition int32, d time.Duration)
	// Observer and ActorProps instrument the partition actors (see
	// topic.Options); ActorProps sees the kinds partition, channel and
	// replica.
	Observer   topic.Observer
	ActorProps func(kind string) []actor.PropsOption
}

// Errors the broker answers with; HTTP and TCP map them to NSQ's codes.
var (
	ErrTopicNotFound   = errors.New("TOPIC_NOT_FOUND")
	ErrChannelNotFound = errors.New("CHANNEL_NOT_FOUND")
	ErrExiting         = errors.New("EXITING")
	ErrTooManyTopics   = errors.New("TOO_MANY_TOPICS")
	// ErrPartitionNotHere: this node holds no replica of the partition.
	ErrPartitionNotHere = errors.New("partition not on this node")
	// ErrTopicGone: an ephemeral topic went with its last channel while a
	// subscription opened it; the topic made anew takes the subscription.
	ErrTopicGone = errors.New("ephemeral topic deleted while subscribing")
)

// Broker is one node's topics.
type Broker struct {
	cfg    Config
	system *actor.ActorSystem
	meta   *cluster.MetaStore
	log    *slog.Logger

	mu      sync.RWMutex
	topics  map[string]*Topic
	closing bool

	// roleMu orders the partition states handed to replicas here: the
	// assignment watch hands each, and an expand seen on the topic watch
	// hands the states that arrived before it.
	roleMu sync.Mutex

	stopWatch    context.CancelFunc
	watching     sync.WaitGroup
	discarding   sync.WaitGroup // directories deleted in the background (discard)
	incarnations atomic.Uint64  // numbers the topics started, for actor names

	healthMu  sync.Mutex
	unhealthy map[string]error // partition → its last disk write error

	// view is what the node, assignment, topic and channel watches last
	// said, so a forwarded publish and a lookup find leaders without
	// reading etcd.
	view atomic.Pointer[clusterView]
	// forwardsWaiting counts forwards waiting for their partition to have
	// a leader this node can reach (leaderNode).
	forwardsWaiting atomic.Int64
	// sentOn counts publishes sent on to the next leader after a refusal
	// that wrote nothing (onToNextLeader, forwardVia).
	sentOn atomic.Int64
	// misdirected counts forwards that reached this node for partitions
	// it does not lead (forwardedEarly): their forwarders' views lag.
	misdirected atomic.Int64

	forwarder *http.Client  // what forwards go out on; nil for the shared client
	refusals  refusals      // leaders' ports that refused a forward's connection
	inFlight  forwardSlots  // forwards under way to each leader
	forwards  forwardQueues // plain publishes waiting for a leader's connections, sent in batches

	writesOff atomic.Int32 // a WritesOff: what /disable/write holds

	history pubHistories // committed bytes by hour (pubhistory.go)

	opening openings // topics opened on a leader's first write

	// attacher attaches subscriptions to the partitions this node starts
	// leading, off roleMu (leadershipMoved).
	attacher *actor.PID

	// changes batches the partition leaders' ISR and write-state changes:
	// a follower node lost makes every partition it followed here shrink
	// its ISR at once.
	changes *cluster.Changer
	known   knownStates // what changes start from

	admission *admissionGate
}

// New makes a broker; Open loads what etcd knows.
func New(cfg Config, system *actor.ActorSystem, meta *cluster.MetaStore) *Broker {
	if cfg.DefaultPartitions <= 0 {
		cfg.DefaultPartitions = 1
	}
	if cfg.DefaultReplicas <= 0 {
		cfg.DefaultReplicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ChannelWait <= 0 {
		cfg.ChannelWait = channelWait
	}
	if cfg.SubOpenWait <= 0 {
		cfg.SubOpenWait = 2 * time.Second
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	if cfg.MaxClockSkew <= 0 {
		cfg.MaxClockSkew = DefaultMaxClockSkew
	}
	b := &Broker{cfg: cfg, system: system, meta: meta, log: cfg.Logger, topics: make(map[string]*Topic), admission: newAdmissionGate(cfg.Admission)}
	// A forward waiting before the node watch first delivers wakes with
	// that delivery.
	b.view.Store(&clusterView{nodesChanged: make(chan struct{})})
	if system != nil {
		b.attacher = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &attacher{b: b} }))
	}
	if cfg.Assignments != nil {
		b.changes = cluster.NewChanger(cfg.Assignments)
		b.changes.Known = b.known.get
	}
	return b
}

// Open starts every topic and channel recorded in etcd, then follows
// partition state changes until Close.
func (b *Broker) Open(ctx context.Context) error {
	if err := b.open(ctx); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(context.Background())
	b.stopWatch = cancel
	b.watching.Add(5)
	go func() {
		defer b.watching.Done()
		b.followNodes(wctx)
	}()
	go func() {
		defer b.watching.Done()
		b.followAssignments(wctx)
	}()
	go func() {
		defer b.watching.Done()
		b.followTopics(wctx)
	}()
	go func() {
		defer b.watching.Done()
		b.followChannels(wctx)
	}()
	go func() {
		defer b.watching.Done()
		b.samplePubHistory(wctx)
	}()
	return nil
}

func (b *Broker) open(ctx context.Context) error {
	metas, err := b.meta.Topics(ctx)
	if err != nil {
		return fmt.Errorf("loading topics: %w", err)
	}
	for _, m := range metas {
		b.leaveISRAfterRestart(ctx, m.Name)
		t, err := b.start(ctx, m)
		if err != nil {
			return err
		}
		if m.Paused {
			t.pause(b.system, true)
		}
	}
	return nil
}

// Topic returns a topic this node has, or nil; a topic being deleted is
// already gone.
func (b *Broker) Topic(name string) *Topic {
	if t := b.registered(name); t != nil && !t.isDeleted() {
		return t
	}
	return nil
}

// registered returns the topic under name, deleted or not.
func (b *Broker) registered(name string) *Topic {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// partitionPID is the actor of a partition on this node, or nil.
func (b *Broker) partitionPID(topicName string, p int32) *actor.PID {
	t := b.Topic(topicName)
	if t == nil {
		return nil
	}
	return t.Partition(int(p))
}

func (b *Broker) topicCount() int {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return len(b.topics)
}

// PartitionsHeld counts the partitions this node holds a replica of.
func (b *Broker) PartitionsHeld() int {
	n := 0
	for _, t := range b.Topics() {
		n += len(t.hosted())
	}
	return n
}

// Topics lists the topics, sorted by name.
func (b *Broker) Topics() []*Topic {
	b.mu.RLock()
	out := make([]*Topic, 0, len(b.topics))
	for _, t := range b.topics {
		if !t.isDeleted() {
			out = append(out, t)
		}
	}
	b.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// CreateTopic makes a topic with n partitions (0 = the default), or returns
// the existing one unchanged; while a topic is being deleted, that is the
// deleted one, which refuses publishes.
func (b *Broker) CreateTopic(ctx context.Context, name string, partitions int) (*Topic, error) {
	return b.CreateTopicWith(ctx, name, TopicSpec{Partitions: partitions})
}

// TopicSpec is what /topic/create may ask for; zero values take the node's
// defaults.
type TopicSpec struct {
	Partitions, Replicas int
	Ordered              bool // consumed only with SUB_ORDERED
	Ext                  bool // messages may carry JSON headers (youzan's extend)
	Settings             Settings
}

// CreateTopicWith is CreateTopic with a replica count and the ordered
// flag. Too few live nodes for the replicas refuse the topic before it is
// recorded.
func (b *Broker) CreateTopicWith(ctx context.Context, name string, spec TopicSpec) (*Topic, error) {
	// A delete racing the creation can remove the placement between its
	// steps; the creation then starts over, and a topic deleted each time
	// is reported as exiting.
	for range 3 {
		t, err := b.createTopicWith(ctx, name, spec)
		if !errors.Is(err, errPlacementIncomplete) {
			return t, err
		}
	}
	return nil, ErrExiting
}

func (b *Broker) createTopicWith(ctx context.Context, name string, spec TopicSpec) (*Topic, error) {
	partitions, replicas := spec.Partitions, spec.Replicas
	for t := b.registered(name); t != nil; t = b.registered(name) {
		if !t.isClosing() {
			return t, nil
		}
		// An ephemeral topic on its way out: made anew once it is gone.
		select {
		case <-t.dropped:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if max := b.cfg.MaxTopics; max > 0 && b.topicCount() >= max {
		return nil, fmt.Errorf("%w: this node serves %d", ErrTooManyTopics, max)
	}
	if partitions <= 0 {
		partitions = b.cfg.DefaultPartitions
	}
	if replicas <= 0 {
		replicas = b.cfg.DefaultReplicas
	}
	if partitions > topic.MaxPartitions {
		return nil, fmt.Errorf("partition_num %d above %d", partitions, topic.MaxPartitions)
	}
	m := cluster.TopicMeta{Name: name, Partitions: int32(partitions), Replicas: int32(replicas), CreatedUnixNano: time.Now().UnixNano(), Ordered: spec.Ordered, Ext: spec.Ext}
	spec.Settings.into(&m)
	if !topic.IsEphemeral(name) {
		if existing, ok, err := b.meta.Topic(ctx, name); err != nil {
			return nil, err
		} else if ok {
			m = existing
		}
		if b.cfg.Assignments != nil {
			nodes, err := b.liveNodes(ctx)
			if err != nil {
				return nil, err
			}
			if int(m.Replicas) > len(nodes) {
				return nil, fmt.Errorf("%w: %d replicas, %d nodes", ErrNotEnoughNodes, m.Replicas, len(nodes))
			}
		}
		// The topic is recorded before its placement, so a node that hears
		// of a partition placed on it always finds the topic.
		var err error
		if m, _, err = b.meta.CreateTopicMeta(ctx, m); err != nil {
			return nil, err
		}
		if b.cfg.Assignments != nil {
			if err := b.ensurePlacement(ctx, name, int(m.Partitions), int(m.Replicas)); err != nil {
				return nil, err
			}
		}
	}
	return b.start(ctx, m)
}

// start opens the partitions of a topic hosted on this node and spawns
// their actors, with the topic's channels, once.
func (b *Broker) start(ctx context.Context, m cluster.TopicMeta) (*Topic, error) {
	chans, err := b.meta.Channels(ctx, m.Name)
	if err != nil {
		b.log.Warn("opening the channels of a topic", "topic", m.Name, "err", err)
	}
	t, fresh, err := b.startPartitions(ctx, m, channelNames(chans))
	if err != nil || !fresh {
		return t, err
	}
	b.settingsFromView(t)
	// A channel created after the first read and heard of by the watch
	// before the topic was registered here was skipped there: read again,
	// now that the watch finds the topic.
	if again, err := b.meta.Channels(ctx, m.Name); err == nil {
		chans = again
	}
	if err := b.openChannels(t, chans); err != nil {
		b.log.Warn("opening the channels of a topic", "topic", t.Name, "err", err)
	}
	return t, nil
}

// startPartitions registers the topic and spawns its partition actors;
// fresh is false when it was registered already.
func (b *Broker) startPartitions(ctx context.Context, m cluster.TopicMeta, channels []string) (t *Topic, fresh bool, err error) {
	roles, err := b.roles(ctx, m)
	if err != nil {
		return nil, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil, false, ErrExiting
	}
	if t, ok := b.topics[m.Name]; ok {
		return t, false, nil
	}
	b.sweepDiscarded(b.topicDir(m.Name))
	t = &Topic{Name: m.Name, Ephemeral: topic.IsEphemeral(m.Name), Replicas: int(m.Replicas), Ordered: m.Ordered, channels: make(map[string]bool), dropped: make(chan struct{}),
		incarnation: b.incarnations.Add(1), created: m.CreatedUnixNano}
	t.slots.Store(newSlots(int(m.Partitions)))
	t.ext.Store(m.Ext)
	t.settings.Store(settingsOf(m))
	for p := int32(0); p < m.Partitions; p++ {
		role, hosted := roles[p]
		if !hosted {
			continue
		}
		pid, err := b.startPartition(t, p, role, channels)
		if err != nil {
			for _, started := range t.hosted() {
				_ = b.system.Root.StopFuture(started).Wait()
			}
			return nil, false, err
		}
		slot := t.slot(int(p))
		slot.pid.Store(pid)
		slot.leads.Store(role.Leader == b.cfg.NodeID)
	}
	b.topics[m.Name] = t
	return t, true, nil
}

// roles reads this node's role in each partition of a topic; a partition
// this node has no part in is absent.
func (b *Broker) roles(ctx context.Context, m cluster.TopicMeta) (map[int32]topic.Role, error) {
	out := make(map[int32]topic.Role, m.Partitions)
	if b.cfg.Assignments == nil || topic.IsEphemeral(m.Name) {
		for p := int32(0); p < m.Partitions; p++ {
			out[p] = topic.Role{Leader: b.cfg.NodeID, ISR: []string{b.cfg.NodeID}, EpochForWrite: 1, Replicas: 1}
		}
		return out, nil
	}
	states, err := b.cfg.Assignments.List(ctx, m.Name)
	if err != nil {
		return nil, fmt.Errorf("reading partitions of %s: %w", m.Name, err)
	}
	if len(states) < int(m.Partitions) {
		return nil, fmt.Errorf("%w: %s has %d of %d partitions placed", errPlacementIncomplete, m.Name, len(states), m.Partitions)
	}
	for _, st := range states {
		if hosts(st, b.cfg.NodeID) {
			out[st.Partition] = roleOf(st)
		}
	}
	return out, nil
}

func hosts(st cluster.PartitionState, node string) bool {
	return st.Leader == node || slices.Contains(st.ISR, node) || slices.Contains(st.Catchup, node)
}

func roleOf(st cluster.PartitionState) topic.Role {
	return topic.Role{Leader: st.Leader, ISR: st.ISR, Catchup: st.Catchup, EpochForWrite: st.EpochForWrite, LeaderSession: st.LeaderSession, LeaderSince: cluster.LeadershipEpoch(st.LeaderSession), Replicas: int(st.Replicas), Revision: st.Revision}
}

func (b *Broker) topicDir(name string) string {
	if topic.IsEphemeral(name) {
		return filepath.Join(b.cfg.DataPath, "ephemeral", name)
	}
	return filepath.Join(b.cfg.DataPath, "topics", name)
}

func (b *Broker) startPartition(t *Topic, p int32, role topic.Role, channels []string) (*actor.PID, error) {
	dir := filepath.Join(b.topicDir(t.Name), fmt.Sprint(p))
	if t.Ephemeral {
		// Ephemeral topics keep nothing across restarts.
		_ = storage.RemoveAll(b.cfg.Storage.FS, dir)
	}
	settings := t.Settings()
	opts := b.cfg.Storage
	opts.SyncEvery = b.syncEvery(settings)
	store, rec, err := storage.OpenPartition(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("opening %s/%d: %w", t.Name, p, err)
	}
	if rec.Changed() {
		b.log.Warn("partition recovered from a torn tail", "topic", t.Name, "partition", p, "recovery", fmt.Sprintf("%+v", rec))
	}
	stateDir := dir
	if t.Ephemeral {
		stateDir = ""
	}
	props := topic.Props(topic.Options{
		Topic:          t.Name,
		Partition:      p,
		Dir:            stateDir,
		Store:          store,
		Writer:         b.cfg.Writer,
		Channel:        b.cfg.Channel,
		SyncTimeout:    b.cfg.Storage.SyncTimeout,
		PersistEvery:   b.cfg.PersistEvery,
		States:         b.cfg.States,
		Logger:         b.log,
		Node:           b.cfg.NodeID,
		Role:           role,
		OnDiskHealth:   b.diskHealth(fmt.Sprintf("%s/%d", t.Name, p)),
		Dial:           b.cfg.Dial,
		OutOfReach:     b.cfg.OutOfReach,
		Attach:         b.cfg.Attach,
		FramesInFlight: b.cfg.FramesInFlight,
		RedialMax:      b.cfg.ReplicaRedialMax,
		CatchupLimit:   b.cfg.CatchupLimit,
		ShrinkISR:      b.shrinker(t.Name, p),
		JoinISR:        b.joiner(t.Name, p),
		Reenable:       b.reenabler(t.Name, p),
		Disabled:       b.disabler(t.Name, p),
		Observer:       b.cfg.Observer,
		ActorProps:     b.cfg.ActorProps,
		Retention:      b.retention(settings),
		RetentionEvery: b.cfg.RetentionEvery,
		Dedupe:         b.dedupe(settings),
		Channels:       channels,
		DeadLetters:    b.deadLetters(t),
	})
	if b.cfg.ActorProps != nil {
		props.Configure(b.cfg.ActorProps("partition")...)
	}
	// Each incarnation of a topic names its actors apart, so a stale PID of
	// a deleted incarnation can never reach a new one's actor.
	pid, err := b.system.Root.SpawnNamed(props, fmt.Sprintf("topic/%s/%d/%d", t.Name, p, t.incarnation))
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	t.slot(int(p)).store.Store(store)
	return pid, nil
}

// PauseTopic pauses or unpauses delivery of the whole topic.
func (b *Broker) PauseTopic(ctx context.Context, t *Topic, paused bool) error {
	if !t.Ephemeral {
		if err := b.meta.SetTopicPaused(ctx, t.Name, paused); err != nil {
			return err
		}
	}
	t.pause(b.system, paused)
	return nil
}

// EmptyTopic drops what waits in the topic for a first channel.
func (b *Broker) EmptyTopic(t *Topic) {
	for _, pid := range t.hosted() {
		b.system.Root.Send(pid, &topic.Emptied{})
	}
}

// DeleteTopic removes a topic, its channels and its files. Until its files
// are gone the topic stays registered, refusing publishes as exiting, so a
// topic made again under the name cannot open files about to be removed.
func (b *Broker) DeleteTopic(ctx context.Context, name string) error {
	t := b.Topic(name)
	if t == nil || !t.setDeleted(true) {
		return ErrTopicNotFound
	}
	if !t.Ephemeral {
		if _, err := b.meta.DeleteTopic(ctx, name); err != nil {
			t.setDeleted(false)
			return err
		}
		// Other nodes drop their replicas when they see the topic's
		// metadata go (followTopics).
		if b.cfg.Assignments != nil {
			if err := b.cfg.Assignments.Delete(ctx, name); err != nil {
				b.log.Warn("removing partition states", "topic", name, "err", err)
			}
		}
	}
	return b.dropTopic(t)
}

// dropTopic stops a deleted topic's actors on this node and removes its
// files, so a topic created again under the name starts empty.
func (b *Broker) dropTopic(t *Topic) error {
	// A local delete and its watch event both drop the topic: the second
	// waits for the first to finish.
	var err error
	t.dropOnce.Do(func() { err = b.drop(t) })
	return err
}

func (b *Broker) drop(t *Topic) error {
	t.setDeleted(true)
	for _, ch := range t.ChannelNames() {
		t.sendAll(b.system, ch, &channel.Deleted{})
	}
	// A poison pill queues behind the publishes already sent, so each of
	// them is answered before the actor stops.
	for _, pid := range t.hosted() {
		_ = b.system.Root.PoisonFuture(pid).Wait()
	}
	// A journal replay must not bring the topic's files back.
	err := storage.RemoveAll(b.cfg.Storage.FS, b.topicDir(t.Name))
	b.mu.Lock()
	if b.topics[t.Name] == t {
		delete(b.topics, t.Name)
	}
	b.mu.Unlock()
	if t.dropped != nil {
		close(t.dropped)
	}
	return err
}

// Stats gathers every partition's statistics, sorted by topic then
// partition, with its channels'.
//
// Every actor is asked at once and the answers gathered after: asked one
// after another, a node of 10,000 partitions whose mailboxes are busy
// (a failover, an overload) took minutes to answer /metrics and /stats,
// the sum of every mailbox's wait instead of the longest. An actor that
// does not answer within statsWait is left out.
func (b *Broker) Stats(filter string) []*topic.Stats {
	var asked []*actor.Future
	for _, t := range b.Topics() {
		if filter != "" && t.Name != filter {
			continue
		}
		for _, pid := range t.hosted() {
			asked = append(asked, b.system.Root.RequestFuture(pid, &topic.StatsRequested{}, statsWait))
		}
	}
	out := make([]*topic.Stats, 0, len(asked))
	for _, f := range asked {
		if res, err := f.Result(); err == nil {
			out = append(out, res.(*topic.Stats))
		}
	}
	b.channelStats(out)
	return out
}

// statsWait bounds how long a partition or channel actor may take to
// tell its figures.
const statsWait = 5 * time.Second

// channelStats adds each partition's channels' snapshots to its stats,
// asking every channel actor at once.
func (b *Broker) channelStats(stats []*topic.Stats) {
	asked := make([][]*actor.Future, len(stats))
	for i, st := range stats {
		for _, ch := range st.ChannelActors {
			asked[i] = append(asked[i], b.system.Root.RequestFuture(ch, &channel.StatsRequested{}, statsWait))
		}
	}
	for i, st := range stats {
		for _, f := range asked[i] {
			if snap, err := f.Result(); err == nil {
				st.Channels = append(st.Channels, *snap.(*channel.Snapshot))
			}
		}
	}
}

// Close stops every partition, which persists channel offsets and syncs the
// logs.
func (b *Broker) Close() {
	if b.stopWatch != nil {
		b.stopWatch()
		b.watching.Wait()
	}
	// No partition is removed or made from here on: the partitions stop
	// without writing their channels' states each, which the node's Close
	// of the states writes in one batch.
	b.cfg.States.Stopping()
	if b.attacher != nil {
		b.system.Root.Stop(b.attacher)
	}
	b.mu.Lock()
	b.closing = true
	topics := b.topics
	b.topics = map[string]*Topic{}
	b.mu.Unlock()
	for _, t := range topics {
		// Channels first, each after its mailbox: FINs already received are
		// applied and persisted before the partition stops.
		for _, ch := range t.ChannelNames() {
			if pids, err := t.channelPIDs(b.system, ch); err == nil {
				for _, pid := range pids {
					if pid != nil {
						_ = b.system.Root.PoisonFuture(pid).Wait()
					}
				}
			}
		}
		for _, pid := range t.hosted() {
			_ = b.system.Root.PoisonFuture(pid).Wait()
		}
		if t.Ephemeral {
			_ = storage.RemoveAll(b.cfg.Storage.FS, b.topicDir(t.Name))
		}
	}
	b.discarding.Wait()
}

// System is the actor system the broker's actors run in.
func (b *Broker) System() *actor.ActorSystem { return b.system }

// NodeID is this node's --node-id.
func (b *Broker) NodeID() string { return b.cfg.NodeID }
