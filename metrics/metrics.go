// Package metrics exports a node's state to Prometheus under the partita_
// prefix. Per-partition and per-channel figures are read from the actors at
// scrape time; events (latencies, ISR changes, elections, fsyncs) are
// observed through small hooks, so the write path carries nothing more than
// a few counter and histogram updates. docs/metrics.md lists every metric.
package metrics

import (
	"context"
	"regexp"
	"strconv"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// StatsSource is where scrape-time figures come from (the broker).
type StatsSource interface {
	Stats(topic string) []*topic.Stats
}

// ClusterView is what this node reads of the cluster's metadata at scrape
// time.
type ClusterView struct {
	Controller      string // node ID of the elected controller, "" if none
	LiveNodes       int
	Partitions      int
	WithoutLeader   int // partitions whose leader is unset or not live
	UnderReplicated int // partitions whose ISR is smaller than their replica count
	CatchingUp      int // replicas catching up, over every partition
	OffPreferred    int // partitions whose live leader is not their preferred replica
	Moving          int // partitions with a replica move under way
	MovingIn        int // replicas those moves add, caught up or not
}

// Options configure New.
type Options struct {
	Node  string
	Stats StatsSource
	// Cluster, if set, reads the cluster's metadata at scrape time.
	Cluster func(ctx context.Context) (ClusterView, error)
	// CatchupRateLimit is --catchup-rate-limit, exported so a dashboard
	// draws the catch-up throughput against it.
	CatchupRateLimit int64
	// Load, if set, reads the node's publish admission at scrape time.
	Load func() broker.AdmissionState
	// WritesOff, if set, reads what /disable/write holds on this node at
	// scrape time.
	WritesOff func() broker.WritesOff
	// ActorRunsQueued, if set, reads how many actor runs wait for a
	// worker at scrape time.
	ActorRunsQueued func() int
}

// Metrics holds the node's registry and the metrics observed as events.
type Metrics struct {
	Registry    *prometheus.Registry
	Connections prometheus.Gauge

	node           string
	publishLatency *prometheus.HistogramVec
	commitLatency  *prometheus.HistogramVec
	ackLatency     *prometheus.HistogramVec
	isrShrinks     *prometheus.CounterVec
	isrExpands     *prometheus.CounterVec
	elections      *prometheus.CounterVec
	catchUpRecords *prometheus.CounterVec
	catchUpBytes   *prometheus.CounterVec
	frames         *prometheus.CounterVec
	frameRecords   *prometheus.CounterVec
	fsync          prometheus.Histogram
	syncfs         prometheus.Histogram
	journalSync    prometheus.Histogram
	actors         *actorMetrics
	controller     controllerMetrics
	liveness       liveness
	// events are the per-partition event families above, which a scrape
	// writes beside the actors' figures (exposition.go).
	events []eventVec
	state  *stateCollector
	// statsFamilies are the families read from the actors at a scrape.
	statsFamilies map[string]bool
	// parts are the node's collectors by the families they give, for a
	// scrape that names its families (Handler).
	parts []part
}

// eventVec is a per-partition event family: its series are created for
// every hosted partition at a scrape, and dropped with the partition.
type eventVec struct {
	name, help string
	histogram  bool
	vec        interface {
		prometheus.Collector
		DeletePartialMatch(prometheus.Labels) int
	}
}

// controllerMetrics are what this node did as the cluster's controller.
type controllerMetrics struct {
	elected   prometheus.Counter
	conflicts prometheus.Counter
	rounds    prometheus.Histogram
	moves     *prometheus.CounterVec
	drains    *prometheus.CounterVec
}

const (
	publishLatencyHelp = "Time from a publish reaching the partition's leader to its answer (committed or failed)."
	commitLatencyHelp  = "Time from a record's local write on the leader to its commit (every ISR follower acknowledged)."
	ackLatencyHelp     = "Time from a record's local write on the leader to a follower's acknowledgement."
	isrShrinksHelp     = "Followers this leader removed from the partition's ISR."
	isrExpandsHelp     = "Caught-up replicas this leader added to the partition's ISR."
	electionsHelp      = "Times this node became the partition's leader."
	catchUpRecordsHelp = "Committed records this leader re-sent to a follower that fell behind."
	catchUpBytesHelp   = "Message bytes of the committed records this leader re-sent to a follower that fell behind (what --catchup-rate-limit paces)."
)

// latencyBuckets span 50µs to about 1.6s.
var latencyBuckets = prometheus.ExponentialBuckets(50e-6, 2, 16)

// New registers the node's metrics, the Go runtime and process collectors,
// and the collectors over the node's state.
func New(opt Options) *Metrics {
	reg := prometheus.NewRegistry()
	node := prometheus.Labels{"node": opt.Node}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets, ConstLabels: node}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: node}, labels)
	}
	m := &Metrics{
		Registry: reg,
		node:     opt.Node,
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "partita_client_connections", Help: "Open NSQ TCP client connections.", ConstLabels: node,
		}),
		publishLatency: histogram("partita_publish_latency_seconds", publishLatencyHelp, "topic", "partition"),
		commitLatency:  histogram("partita_commit_latency_seconds", commitLatencyHelp, "topic", "partition"),
		ackLatency:     histogram("partita_replica_ack_latency_seconds", ackLatencyHelp, "topic", "partition", "follower"),
		isrShrinks:     counter("partita_isr_shrinks_total", isrShrinksHelp, "topic", "partition"),
		isrExpands:     counter("partita_isr_expands_total", isrExpandsHelp, "topic", "partition"),
		elections:      counter("partita_leader_elections_total", electionsHelp, "topic", "partition"),
		catchUpRecords: counter("partita_replica_catchup_records_total", catchUpRecordsHelp, "topic", "partition", "follower"),
		catchUpBytes:   counter("partita_replica_catchup_bytes_total", catchUpBytesHelp, "topic", "partition", "follower"),
		frames: counter("partita_replica_frames_total",
			"Frames of records this node sent to a follower as leader; records per frame is partita_replica_frame_records_total over this.", "follower"),
		frameRecords: counter("partita_replica_frame_records_total",
			"Records this node sent to a follower as leader, in frames.", "follower"),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_fsync_duration_seconds", Help: "Time to fsync a partition's segment and commit log; the count is the number of fsyncs.",
			Buckets: latencyBuckets, ConstLabels: node,
		}),
		syncfs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_syncfs_duration_seconds", Help: "Time the node's syncfs of its data directory's filesystem took, the write-back that covers every partition's commits (--sync-timeout, and past --sync-every); the count is the number of syncfs calls.",
			Buckets: latencyBuckets, ConstLabels: node,
		}),
		journalSync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_journal_sync_duration_seconds", Help: "Time the node's journal took to write out and fdatasync the records of every partition's writes (--journal; --sync-timeout, and past --sync-every); the count is the number of journal syncs. Its checkpoints are syncfs calls, counted in partita_syncfs_duration_seconds.",
			Buckets: latencyBuckets, ConstLabels: node,
		}),
		actors:     newActorMetrics(node),
		controller: newControllerMetrics(node),
		liveness:   newLiveness(node),
	}
	// The runtime's metrics carry the node label too, so one dashboard
	// variable selects everything of a node.
	// The scheduler's latencies too: how long runnable goroutines waited
	// for a thread, which is what a saturated node's lease renewals and
	// heartbeats wait in.
	labelled := &recorder{}
	prometheus.WrapRegistererWith(node, labelled).MustRegister(
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(
			collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/sched/latencies:seconds$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.register(labelled.cs...)
	catchupLimit := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "partita_catchup_rate_limit_bytes", ConstLabels: node,
		Help: "Bytes a second this node's catch-up pushes may send in all (--catchup-rate-limit); 0 for no limit.",
	})
	catchupLimit.Set(float64(opt.CatchupRateLimit))
	if opt.ActorRunsQueued != nil {
		m.register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "partita_actor_runs_queued", ConstLabels: node,
			Help: "Actor runs waiting for a worker: past 8 runs a core at once the rest queue, in order; a queue that stays long means the node's actors have more work than its cores.",
		}, func() float64 { return float64(opt.ActorRunsQueued()) }))
	}
	m.register(m.Connections, catchupLimit, m.fsync, m.syncfs, m.journalSync, m.actors, m.frames, m.frameRecords,
		m.controller.elected, m.controller.conflicts, m.controller.rounds, m.controller.moves, m.controller.drains,
		&loadCollector{node: opt.Node, read: opt.Load},
		&writesOffCollector{node: opt.Node, read: opt.WritesOff})
	m.register(m.liveness.collectors()...)
	// The state collector reads the actors, the event series and the
	// metadata in one for a whole scrape; a scrape naming its families
	// takes only the parts it names.
	m.events = []eventVec{
		{"partita_publish_latency_seconds", publishLatencyHelp, true, m.publishLatency},
		{"partita_commit_latency_seconds", commitLatencyHelp, true, m.commitLatency},
		{"partita_replica_ack_latency_seconds", ackLatencyHelp, true, m.ackLatency},
		{"partita_isr_shrinks_total", isrShrinksHelp, false, m.isrShrinks},
		{"partita_isr_expands_total", isrExpandsHelp, false, m.isrExpands},
		{"partita_leader_elections_total", electionsHelp, false, m.elections},
		{"partita_replica_catchup_records_total", catchUpRecordsHelp, false, m.catchUpRecords},
		{"partita_replica_catchup_bytes_total", catchUpBytesHelp, false, m.catchUpBytes},
	}
	m.state = &stateCollector{m: m, src: opt.Stats, cluster: opt.Cluster}
	reg.MustRegister(m.state)
	m.addParts(clusterPart{m.state})
	m.statsFamilies = familiesOf(statsPart{m.state})
	m.parts = append(m.parts, part{families: m.statsFamilies, c: statsPart{m.state}, written: true})
	for _, v := range m.events {
		m.parts = append(m.parts, part{families: familiesOf(v.vec), c: v.vec, written: true})
	}
	return m
}

func newControllerMetrics(node prometheus.Labels) controllerMetrics {
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partita_controller_leader_moves_total", ConstLabels: node,
		Help: "Partition leaderships this node moved as the controller from a live leader to another ISR member, by reason: asked (/topic/partition/move), balance (back to the preferred replica), drain (off a node being emptied), leaving (off a node that is stopping, before it stops).",
	}, []string{"reason"})
	// Every reason from the start, so a rate over them needs no first move.
	for _, r := range []string{cluster.MoveAsked, cluster.MoveBalance, cluster.MoveDrain, cluster.MoveLeaving} {
		moves.WithLabelValues(r)
	}
	drains := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "partita_controller_leader_move_drains_total", ConstLabels: node,
		Help: "Leaderships this node as the controller asked to drain before moving them (--leader-move-drain), by outcome: drained (no write in flight when the move was stored, so it failed none), not_drained (the old leader did not answer in time, or no longer led: the move fails the writes it had in flight) or gave_way (a node was lost before the answers were in: the moves were not stored, so that its partitions are elected first, and a later round plans them again).",
	}, []string{"outcome"})
	for _, o := range []string{"drained", "not_drained", "gave_way"} {
		drains.WithLabelValues(o)
	}
	return controllerMetrics{
		moves:  moves,
		drains: drains,
		elected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partita_controller_elected_leaders_total", ConstLabels: node,
			Help: "Partition leaders this node stored as the controller, one per partition, after the leader was lost or resigned.",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partita_controller_election_conflicts_total", ConstLabels: node,
			Help: "Partition elections this controller found changed concurrently when storing them, and did again from the stored state.",
		}),
		rounds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_controller_failover_seconds", ConstLabels: node, Buckets: latencyBuckets,
			Help: "Time of one round of elections by this controller: asking the candidates their last LogIDs, deciding, storing every new leader.",
		}),
	}
}

// ObserveFailover records one round of elections by this node as the
// controller.
func (m *Metrics) ObserveFailover(elected, conflicts int, took time.Duration) {
	m.controller.elected.Add(float64(elected))
	m.controller.conflicts.Add(float64(conflicts))
	m.controller.rounds.Observe(took.Seconds())
}

// ObserveLeaderMoves records leaderships this node moved as the controller.
func (m *Metrics) ObserveLeaderMoves(reason string, moved int) {
	m.controller.moves.WithLabelValues(reason).Add(float64(moved))
}

// ObserveLeaderMoveDrains records what became of a round's leaderships
// asked to drain before they moved.
func (m *Metrics) ObserveLeaderMoveDrains(r cluster.HandOverRound) {
	m.controller.drains.WithLabelValues("drained").Add(float64(r.Drained))
	m.controller.drains.WithLabelValues("not_drained").Add(float64(r.NotDrained))
	m.controller.drains.WithLabelValues("gave_way").Add(float64(r.GaveWay))
}

// ObservePublish records one publish's latency.
func (m *Metrics) ObservePublish(topicName string, partition int32, d time.Duration) {
	m.publishLatency.WithLabelValues(topicName, partitionLabel(partition)).Observe(d.Seconds())
}

// ObserveFsync records one fsync of a partition's files.
func (m *Metrics) ObserveFsync(d time.Duration) { m.fsync.Observe(d.Seconds()) }

// ObserveSyncfs records one syncfs of the node's data directory.
func (m *Metrics) ObserveSyncfs(d time.Duration) { m.syncfs.Observe(d.Seconds()) }

// ObserveJournalSync records one sync of the node's journal.
func (m *Metrics) ObserveJournalSync(d time.Duration) { m.journalSync.Observe(d.Seconds()) }

// Observer is the partition actors' hook into these metrics.
func (m *Metrics) Observer() topic.Observer { return observer{m} }

type observer struct{ m *Metrics }

func (o observer) Committed(t string, p int32, _ int, d time.Duration) {
	o.m.commitLatency.WithLabelValues(t, partitionLabel(p)).Observe(d.Seconds())
}

func (o observer) ReplicaAcked(t string, p int32, follower string, d time.Duration) {
	o.m.ackLatency.WithLabelValues(t, partitionLabel(p), follower).Observe(d.Seconds())
}

func (o observer) ISRShrunk(t string, p int32, removed int) {
	o.m.isrShrinks.WithLabelValues(t, partitionLabel(p)).Add(float64(max(removed, 1)))
}

func (o observer) ISRExpanded(t string, p int32, _ string) {
	o.m.isrExpands.WithLabelValues(t, partitionLabel(p)).Inc()
}

func (o observer) BecameLeader(t string, p int32) {
	o.m.elections.WithLabelValues(t, partitionLabel(p)).Inc()
}

func (o observer) FrameSent(follower string, records int) {
	o.m.frames.WithLabelValues(follower).Inc()
	o.m.frameRecords.WithLabelValues(follower).Add(float64(records))
}

func (o observer) CatchUpSent(t string, p int32, follower string, records, bytes int) {
	o.m.catchUpRecords.WithLabelValues(t, partitionLabel(p), follower).Add(float64(records))
	o.m.catchUpBytes.WithLabelValues(t, partitionLabel(p), follower).Add(float64(bytes))
}

func partitionLabel(p int32) string { return strconv.Itoa(int(p)) }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
