package metrics

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	partLabels = []string{"node", "topic", "partition"}
	chanLabels = []string{"node", "topic", "partition", "channel"}
	nodeLabels = []string{"node"}

	descPubMessages = prometheus.NewDesc("partita_publish_messages_total", "Messages committed to the partition on this node (as leader or follower).", partLabels, nil)
	descPubBytes    = prometheus.NewDesc("partita_publish_bytes_total", "Encoded bytes committed to the partition on this node (as leader or follower).", partLabels, nil)
	descLogEnd      = prometheus.NewDesc("partita_partition_log_end_bytes", "Committed end offset of the partition log.", partLabels, nil)
	descDiskBytes   = prometheus.NewDesc("partita_partition_disk_bytes", "Bytes the partition's files (segments, commit log, channel state) take on disk. Between walks of the directory, one at least every 2 minutes, it follows the log's growth, so segments retention deleted show at the next walk.", partLabels, nil)
	descFsyncs      = prometheus.NewDesc("partita_partition_fsyncs_total", "Syncs of the partition's segment and commit log since it opened: its own fsyncs, and the node's syncfs calls it asked for past --sync-every.", partLabels, nil)
	descTopicDepth  = prometheus.NewDesc("partita_topic_depth", "Messages waiting in a partition for its first channel.", partLabels, nil)
	descDedupeIDs   = prometheus.NewDesc("partita_topic_dedupe_entries", "Message IDs the partition's dedupe window remembers on this node (0 unless it leads the partition and the topic has a dedupe window).", partLabels, nil)
	descDedupeHits  = prometheus.NewDesc("partita_topic_dedupe_hits_total", "Published messages whose ID the partition wrote within its dedupe window, answered without a write, since the partition opened on this node.", partLabels, nil)
	descWritable    = prometheus.NewDesc("partita_partition_writable", "1 when the partition takes writes on this node now (it leads, writes are enabled and not held for an ISR change).", partLabels, nil)
	descDisabled    = prometheus.NewDesc("partita_partition_write_disabled", "1 when this node leads the partition but its writes are disabled (after a write it could not roll forward, until a new epoch).", partLabels, nil)
	descWritesIn    = prometheus.NewDesc("partita_partition_writes_in_flight", "Records the leader wrote locally and has not committed yet.", partLabels, nil)
	descWaiting     = prometheus.NewDesc("partita_partition_publish_waiting_messages", "Published messages queued on the leader for a write.", partLabels, nil)
	descLeader      = prometheus.NewDesc("partita_partition_is_leader", "1 when this node leads the partition.", partLabels, nil)
	descISR         = prometheus.NewDesc("partita_partition_isr_size", "In-sync replicas of the partition, as this node knows them.", partLabels, nil)
	descReplicas    = prometheus.NewDesc("partita_partition_replicas", "Configured replica count of the partition.", partLabels, nil)
	descUnder       = prometheus.NewDesc("partita_partition_under_replicated", "1 when this node leads the partition and its ISR is smaller than its replica count.", partLabels, nil)
	descCatchup     = prometheus.NewDesc("partita_partition_catchup_replicas", "Replicas of the partition catching up to rejoin its ISR.", partLabels, nil)

	descDepth     = prometheus.NewDesc("partita_channel_depth", "Messages waiting for delivery on the channel.", chanLabels, nil)
	descInFlight  = prometheus.NewDesc("partita_channel_in_flight", "Messages delivered and not yet finished.", chanLabels, nil)
	descDeferred  = prometheus.NewDesc("partita_channel_deferred", "Messages deferred by DPUB or REQ with a delay.", chanLabels, nil)
	descRequeues  = prometheus.NewDesc("partita_channel_requeues_total", "REQ commands accepted.", chanLabels, nil)
	descTimeouts  = prometheus.NewDesc("partita_channel_timeouts_total", "In-flight messages that timed out.", chanLabels, nil)
	descDead      = prometheus.NewDesc("partita_channel_dead_lettered_total", "Messages past the channel's max_attempts published to <topic>.dead and finished here, by this node as the partition's leader since it started; 0 on every channel.", chanLabels, nil)
	descMessages  = prometheus.NewDesc("partita_channel_messages_total", "Messages that entered the channel.", chanLabels, nil)
	descConsumers = prometheus.NewDesc("partita_channel_consumers", "Connections subscribed to the channel.", chanLabels, nil)
	descLagMsgs   = prometheus.NewDesc("partita_channel_lag_messages", "Messages committed to the partition and not yet finished on the channel.", chanLabels, nil)
	descLagSecs   = prometheus.NewDesc("partita_channel_lag_seconds", "Age of the oldest message not yet finished on the channel; 0 when none is.", chanLabels, nil)
	// The label is percentile, not quantile, which Prometheus keeps for
	// summaries: these are gauges of estimates.
	descE2E = prometheus.NewDesc("partita_channel_e2e_processing_latency_seconds",
		"Estimated percentile of the time from a message's publish to its FIN over --e2e-processing-latency-window-time; only with --e2e-processing-latency-percentile.",
		append(slices.Clone(chanLabels), "percentile"), nil)
	descRateLimit   = prometheus.NewDesc("partita_channel_rate_limit_bytes", "The channel's delivery limit in bytes a second (youzan's /channel/ratelimit, in kilobytes of 1024 bytes); 0 for none.", chanLabels, nil)
	descRateLimited = prometheus.NewDesc("partita_channel_rate_limited_total", "Times delivery on the channel waited for its rate limit.", chanLabels, nil)
	descLimited     = prometheus.NewDesc("partita_channel_client_limited_consumers", "Consumers of the channel whose RDY a client limit (youzan's /channel/setclientlimit) caps.", chanLabels, nil)
	descEmptied     = prometheus.NewDesc("partita_channel_deferred_emptied_total", "Deferred messages of the channel dropped by youzan's /channel/emptydelayed.", chanLabels, nil)
	descE2ECount    = prometheus.NewDesc("partita_channel_e2e_processing_fins", "FINs the channel's end-to-end latency estimates cover now; only with --e2e-processing-latency-percentile.", chanLabels, nil)

	descController    = prometheus.NewDesc("partita_controller", "1 when this node is the cluster's elected controller.", nodeLabels, nil)
	descLiveNodes     = prometheus.NewDesc("partita_cluster_live_nodes", "Nodes registered in the cluster's metadata, as this node reads it.", nodeLabels, nil)
	descPartitions    = prometheus.NewDesc("partita_cluster_partitions", "Partitions in the cluster's metadata, as this node reads it.", nodeLabels, nil)
	descNoLeader      = prometheus.NewDesc("partita_cluster_partitions_without_leader", "Partitions whose leader is unset or not a live node, as this node reads the metadata.", nodeLabels, nil)
	descClusterUnder  = prometheus.NewDesc("partita_cluster_under_replicated_partitions", "Partitions whose ISR is smaller than their replica count, as this node reads the metadata.", nodeLabels, nil)
	descClusterCatch  = prometheus.NewDesc("partita_cluster_catchup_replicas", "Replicas catching up to rejoin an ISR, over every partition, as this node reads the metadata.", nodeLabels, nil)
	descOffPreferred  = prometheus.NewDesc("partita_cluster_partitions_off_preferred_leader", "Partitions with a live leader other than their preferred replica, which the leader balance moves back once that replica is in the ISR, as this node reads the metadata.", nodeLabels, nil)
	descClusterMoving = prometheus.NewDesc("partita_cluster_moving_partitions", "Partitions with a replica move under way (a move, a replica count change, a drain), as this node reads the metadata.", nodeLabels, nil)
	descClusterMoveIn = prometheus.NewDesc("partita_cluster_moving_replicas", "Replicas the moves under way add, over every partition, as this node reads the metadata; each leaves this count when its move ends.", nodeLabels, nil)
	descMetadataError = prometheus.NewDesc("partita_cluster_metadata_up", "1 when this node could read the cluster's metadata for this scrape.", nodeLabels, nil)
)

// stateCollector reads the partitions, channels and cluster metadata at
// scrape time. It also owns the per-partition event metrics, so that every
// partition this node hosts has their series, zero or not, from the first
// scrape, and a deleted partition's series go away.
type stateCollector struct {
	m       *Metrics
	src     StatsSource
	cluster func(context.Context) (ClusterView, error)

	mu   sync.Mutex // scrapes may overlap
	seen map[[2]string]bool
	disk *diskUsage
}

func (c *stateCollector) partitionVecs() []interface {
	prometheus.Collector
	DeletePartialMatch(prometheus.Labels) int
} {
	m := c.m
	return []interface {
		prometheus.Collector
		DeletePartialMatch(prometheus.Labels) int
	}{m.publishLatency, m.commitLatency, m.ackLatency, m.isrShrinks, m.isrExpands, m.elections, m.catchUpRecords, m.catchUpBytes}
}

// statsDescs are the families read from the partition and channel
// actors at scrape time; clusterDescs those read from the metadata.
var (
	statsDescs = []*prometheus.Desc{descPubMessages, descPubBytes, descLogEnd, descDiskBytes, descFsyncs, descTopicDepth, descDedupeIDs, descDedupeHits,
		descWritable, descDisabled, descWritesIn, descWaiting, descLeader, descISR, descReplicas, descUnder, descCatchup,
		descDepth, descInFlight, descDeferred, descRequeues, descTimeouts, descDead, descMessages, descConsumers, descLagMsgs, descLagSecs, descE2E, descE2ECount, descRateLimit, descRateLimited, descLimited, descEmptied}
	clusterDescs = []*prometheus.Desc{descController, descLiveNodes, descPartitions, descNoLeader, descClusterUnder, descClusterCatch, descOffPreferred, descClusterMoving, descClusterMoveIn, descMetadataError}
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.partitionVecs() {
		v.Describe(ch)
	}
	for _, d := range statsDescs {
		ch <- d
	}
	for _, d := range clusterDescs {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectStats(ch)
	for _, v := range c.partitionVecs() {
		v.Collect(ch)
	}
	c.collectCluster(ch)
}

// collectStats asks every partition and channel actor for its figures,
// and makes the event series of every hosted partition exist.
func (c *stateCollector) collectStats(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	seen := map[[2]string]bool{}
	if c.disk == nil {
		c.disk = newDiskUsage()
	}
	for _, st := range c.src.Stats("") {
		p := partitionLabel(st.Partition)
		seen[[2]string{st.Topic, p}] = true
		c.precreate(st.Topic, p, st.Followers)
		pl := []string{c.m.node, st.Topic, p}
		gauge := func(d *prometheus.Desc, v float64, labels []string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
		}
		counter := func(d *prometheus.Desc, v float64, labels []string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
		}
		counter(descPubMessages, float64(st.MessageCount), pl)
		counter(descPubBytes, float64(st.MessageBytes), pl)
		counter(descFsyncs, float64(st.Syncs), pl)
		gauge(descLogEnd, float64(st.End), pl)
		gauge(descDiskBytes, float64(c.disk.bytes(st.Dir, st.End, st.Records, now)), pl)
		gauge(descTopicDepth, float64(st.Depth), pl)
		gauge(descDedupeIDs, float64(st.DedupeEntries), pl)
		counter(descDedupeHits, float64(st.DedupeHits), pl)
		gauge(descWritable, boolValue(st.Writable), pl)
		gauge(descDisabled, boolValue(st.Disabled), pl)
		gauge(descWritesIn, float64(st.InFlight), pl)
		gauge(descWaiting, float64(st.Waiting), pl)
		gauge(descLeader, boolValue(st.Leader), pl)
		gauge(descISR, float64(st.ISR), pl)
		gauge(descReplicas, float64(st.Replicas), pl)
		gauge(descUnder, boolValue(st.Leader && st.ISR < st.Replicas), pl)
		gauge(descCatchup, float64(st.Catchup), pl)
		for _, cs := range st.Channels {
			cl := []string{c.m.node, st.Topic, p, cs.Name}
			s := cs.Stats
			gauge(descDepth, float64(s.Depth), cl)
			gauge(descInFlight, float64(s.InFlight), cl)
			gauge(descDeferred, float64(s.Deferred), cl)
			counter(descRequeues, float64(s.RequeueCount), cl)
			counter(descTimeouts, float64(s.TimeoutCount), cl)
			counter(descDead, float64(s.DeadLettered), cl)
			counter(descMessages, float64(s.MessageCount), cl)
			gauge(descConsumers, float64(len(cs.Consumers)), cl)
			gauge(descLagMsgs, float64(max(s.EndCount-s.ConfirmedCount, 0)), cl)
			lag := 0.0
			if cs.Oldest > 0 {
				lag = max(now.Sub(time.Unix(0, cs.Oldest)).Seconds(), 0)
			}
			gauge(descLagSecs, lag, cl)
			gauge(descRateLimit, float64(s.RateLimitKB*1024), cl)
			counter(descRateLimited, float64(s.RateLimited), cl)
			gauge(descLimited, float64(cs.Limited), cl)
			counter(descEmptied, float64(s.DeferredEmptied), cl)
			if cs.E2E != nil {
				gauge(descE2ECount, float64(cs.E2E.Count), cl)
				for _, p := range cs.E2E.Percentiles() {
					gauge(descE2E, p.Value/1e9, append(slices.Clone(cl), strconv.FormatFloat(p.Quantile*100, 'g', -1, 64)))
				}
			}
		}
	}
	c.forgetMissing(seen)
	c.disk.forget(now)
}

// statsPart and clusterPart are a stateCollector's two reads as
// collectors of their own, for scrapes that name their families
// (Metrics.Handler): a scrape of cluster figures asks no actor.
type statsPart struct{ *stateCollector }

func (c statsPart) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range statsDescs {
		ch <- d
	}
}

func (c statsPart) Collect(ch chan<- prometheus.Metric) { c.collectStats(ch) }

type clusterPart struct{ *stateCollector }

func (c clusterPart) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range clusterDescs {
		ch <- d
	}
}

func (c clusterPart) Collect(ch chan<- prometheus.Metric) { c.collectCluster(ch) }

// precreate makes the event series of a partition exist before any event.
func (c *stateCollector) precreate(t, p string, followers []string) {
	m := c.m
	m.publishLatency.WithLabelValues(t, p)
	m.commitLatency.WithLabelValues(t, p)
	m.isrShrinks.WithLabelValues(t, p)
	m.isrExpands.WithLabelValues(t, p)
	m.elections.WithLabelValues(t, p)
	for _, f := range followers {
		m.ackLatency.WithLabelValues(t, p, f)
		m.catchUpRecords.WithLabelValues(t, p, f)
		m.catchUpBytes.WithLabelValues(t, p, f)
	}
}

// forgetMissing drops the event series of partitions no longer hosted.
func (c *stateCollector) forgetMissing(seen map[[2]string]bool) {
	for k := range c.seen {
		if !seen[k] {
			for _, v := range c.partitionVecs() {
				v.DeletePartialMatch(prometheus.Labels{"topic": k[0], "partition": k[1]})
			}
		}
	}
	c.seen = seen
}

func (c *stateCollector) collectCluster(ch chan<- prometheus.Metric) {
	if c.cluster == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := c.cluster(ctx)
	node := c.m.node
	gauge := func(d *prometheus.Desc, x float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, node)
	}
	gauge(descMetadataError, boolValue(err == nil))
	if err != nil {
		return
	}
	gauge(descController, boolValue(v.Controller == node))
	gauge(descLiveNodes, float64(v.LiveNodes))
	gauge(descPartitions, float64(v.Partitions))
	gauge(descNoLeader, float64(v.WithoutLeader))
	gauge(descClusterUnder, float64(v.UnderReplicated))
	gauge(descClusterCatch, float64(v.CatchingUp))
	gauge(descOffPreferred, float64(v.OffPreferred))
	gauge(descClusterMoving, float64(v.Moving))
	gauge(descClusterMoveIn, float64(v.MovingIn))
}
