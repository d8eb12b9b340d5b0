package metrics

import (
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/prometheus/client_golang/prometheus"
)

// A node of 10,000 partitions has hundreds of thousands of series read
// from its actors at scrape time. The families below are defined once, as
// tables, so a scrape can write them as text straight from the actors'
// figures (exposition.go) and a Gather can still build them as client
// library metrics (the catalog, tests) from the same definitions.

// family is a metric family's name, help and type.
type family struct {
	name, help string
	kind       prometheus.ValueType
	desc       *prometheus.Desc
}

func (f family) typeName() string {
	if f.kind == prometheus.CounterValue {
		return "counter"
	}
	return "gauge"
}

// partRow is one hosted partition's figures of one scrape.
type partRow struct {
	st        *topic.Stats
	partition string // the label
	disk      int64  // partita_partition_disk_bytes
}

// chanRow is one channel's figures of one scrape.
type chanRow struct {
	part *partRow
	cs   *channel.Snapshot
	now  time.Time
}

type partFamily struct {
	family
	value func(*partRow) float64
}

type chanFamily struct {
	family
	value func(*chanRow) float64
}

func gaugeOf(name, help string, labels []string) family {
	return family{name, help, prometheus.GaugeValue, prometheus.NewDesc(name, help, labels, nil)}
}

func counterOf(name, help string, labels []string) family {
	return family{name, help, prometheus.CounterValue, prometheus.NewDesc(name, help, labels, nil)}
}

var partFamilies = []partFamily{
	{counterOf("partita_publish_messages_total", "Messages committed to the partition on this node (as leader or follower).", partLabels),
		func(r *partRow) float64 { return float64(r.st.MessageCount) }},
	{counterOf("partita_publish_bytes_total", "Encoded bytes committed to the partition on this node (as leader or follower).", partLabels),
		func(r *partRow) float64 { return float64(r.st.MessageBytes) }},
	{counterOf("partita_partition_fsyncs_total", "Syncs of the partition's segment and commit log since it opened: its own fsyncs, and the node's syncfs calls it asked for past --sync-every.", partLabels),
		func(r *partRow) float64 { return float64(r.st.Syncs) }},
	{gaugeOf("partita_partition_log_end_bytes", "Committed end offset of the partition log.", partLabels),
		func(r *partRow) float64 { return float64(r.st.End) }},
	{gaugeOf("partita_partition_disk_bytes", "Bytes the partition's files (segments, commit log, channel state) take on disk. Between walks of the directory, one at least every 2 minutes, it follows the log's growth, so segments retention deleted show at the next walk.", partLabels),
		func(r *partRow) float64 { return float64(r.disk) }},
	{gaugeOf("partita_topic_depth", "Messages waiting in a partition for its first channel.", partLabels),
		func(r *partRow) float64 { return float64(r.st.Depth) }},
	{gaugeOf("partita_topic_dedupe_entries", "Message IDs the partition's dedupe window remembers on this node (0 unless it leads the partition and the topic has a dedupe window).", partLabels),
		func(r *partRow) float64 { return float64(r.st.DedupeEntries) }},
	{counterOf("partita_topic_dedupe_hits_total", "Published messages whose ID the partition wrote within its dedupe window, answered without a write, since the partition opened on this node.", partLabels),
		func(r *partRow) float64 { return float64(r.st.DedupeHits) }},
	{gaugeOf("partita_partition_writable", "1 when the partition takes writes on this node now (it leads, writes are enabled and not held for an ISR change).", partLabels),
		func(r *partRow) float64 { return boolValue(r.st.Writable) }},
	{gaugeOf("partita_partition_write_disabled", "1 when this node leads the partition but its writes are disabled (after a write it could not roll forward, until a new epoch).", partLabels),
		func(r *partRow) float64 { return boolValue(r.st.Disabled) }},
	{gaugeOf("partita_partition_writes_in_flight", "Records the leader wrote locally and has not committed yet.", partLabels),
		func(r *partRow) float64 { return float64(r.st.InFlight) }},
	{gaugeOf("partita_partition_publish_waiting_messages", "Published messages queued on the leader for a write.", partLabels),
		func(r *partRow) float64 { return float64(r.st.Waiting) }},
	{gaugeOf("partita_partition_is_leader", "1 when this node leads the partition.", partLabels),
		func(r *partRow) float64 { return boolValue(r.st.Leader) }},
	{gaugeOf("partita_partition_isr_size", "In-sync replicas of the partition, as this node knows them.", partLabels),
		func(r *partRow) float64 { return float64(r.st.ISR) }},
	{gaugeOf("partita_partition_replicas", "Configured replica count of the partition.", partLabels),
		func(r *partRow) float64 { return float64(r.st.Replicas) }},
	{gaugeOf("partita_partition_under_replicated", "1 when this node leads the partition and its ISR is smaller than its replica count.", partLabels),
		func(r *partRow) float64 { return boolValue(r.st.Leader && r.st.ISR < r.st.Replicas) }},
	{gaugeOf("partita_partition_catchup_replicas", "Replicas of the partition catching up to rejoin its ISR.", partLabels),
		func(r *partRow) float64 { return float64(r.st.Catchup) }},
}

var chanFamilies = []chanFamily{
	{gaugeOf("partita_channel_depth", "Messages waiting for delivery on the channel.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.Depth) }},
	{gaugeOf("partita_channel_in_flight", "Messages delivered and not yet finished.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.InFlight) }},
	{gaugeOf("partita_channel_deferred", "Messages deferred by DPUB or REQ with a delay.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.Deferred) }},
	{counterOf("partita_channel_requeues_total", "REQ commands accepted.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.RequeueCount) }},
	{counterOf("partita_channel_timeouts_total", "In-flight messages that timed out.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.TimeoutCount) }},
	{counterOf("partita_channel_dead_lettered_total", "Messages past the channel's max_attempts published to <topic>.dead and finished here, by this node as the partition's leader since it started; 0 on every channel.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.DeadLettered) }},
	{counterOf("partita_channel_messages_total", "Messages that entered the channel.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.MessageCount) }},
	{gaugeOf("partita_channel_consumers", "Connections subscribed to the channel.", chanLabels),
		func(r *chanRow) float64 { return float64(len(r.cs.Consumers)) }},
	{gaugeOf("partita_channel_lag_messages", "Messages committed to the partition and not yet finished on the channel.", chanLabels),
		func(r *chanRow) float64 { return float64(max(r.cs.Stats.EndCount-r.cs.Stats.ConfirmedCount, 0)) }},
	{gaugeOf("partita_channel_lag_seconds", "Age of the oldest message not yet finished on the channel; 0 when none is.", chanLabels),
		func(r *chanRow) float64 {
			if r.cs.Oldest <= 0 {
				return 0
			}
			return max(r.now.Sub(time.Unix(0, r.cs.Oldest)).Seconds(), 0)
		}},
	{gaugeOf("partita_channel_rate_limit_bytes", "The channel's delivery limit in bytes a second (youzan's /channel/ratelimit, in kilobytes of 1024 bytes); 0 for none.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.RateLimitKB * 1024) }},
	{counterOf("partita_channel_rate_limited_total", "Times delivery on the channel waited for its rate limit.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.RateLimited) }},
	{gaugeOf("partita_channel_client_limited_consumers", "Consumers of the channel whose RDY a client limit (youzan's /channel/setclientlimit) caps.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Limited) }},
	{counterOf("partita_channel_deferred_emptied_total", "Deferred messages of the channel dropped by youzan's /channel/emptydelayed.", chanLabels),
		func(r *chanRow) float64 { return float64(r.cs.Stats.DeferredEmptied) }},
}

// The end-to-end families exist only for channels that track the latency.
var e2eCountFamily = chanFamily{
	gaugeOf("partita_channel_e2e_processing_fins", "FINs the channel's end-to-end latency estimates cover now; only with --e2e-processing-latency-percentile.", chanLabels),
	func(r *chanRow) float64 { return float64(r.cs.E2E.Count) },
}

const (
	e2eName = "partita_channel_e2e_processing_latency_seconds"
	e2eHelp = "Estimated percentile of the time from a message's publish to its FIN over --e2e-processing-latency-window-time; only with --e2e-processing-latency-percentile."
)
