// Package metrics exports a node's state to Prometheus under the partita_
// prefix. Per-partition and per-channel figures are read from the actors at
// scrape time, so the write path carries no metric bookkeeping beyond one
// latency observation per publish.
package metrics

import (
	"strconv"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// StatsSource is where scrape-time figures come from (the broker).
type StatsSource interface {
	Stats(topic string) []*topic.Stats
}

// Metrics holds the node's registry and the metrics observed as events.
type Metrics struct {
	Registry       *prometheus.Registry
	PublishLatency *prometheus.HistogramVec
	Connections    prometheus.Gauge
}

// New registers the node's metrics, the Go runtime and process collectors,
// and a collector over src.
func New(node string, src StatsSource) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		PublishLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:        "partita_publish_latency_seconds",
			Help:        "Time from a publish reaching the node to its answer (committed or failed).",
			Buckets:     prometheus.ExponentialBuckets(50e-6, 2, 16),
			ConstLabels: prometheus.Labels{"node": node},
		}, []string{"topic", "partition"}),
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name:        "partita_client_connections",
			Help:        "Open NSQ TCP client connections.",
			ConstLabels: prometheus.Labels{"node": node},
		}),
	}
	reg.MustRegister(m.PublishLatency, m.Connections,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&stateCollector{src: src, node: node})
	return m
}

// ObservePublish records one publish's latency.
func (m *Metrics) ObservePublish(topicName string, partition int32, d time.Duration) {
	m.PublishLatency.WithLabelValues(topicName, strconv.Itoa(int(partition))).Observe(d.Seconds())
}

var (
	partLabels = []string{"node", "topic", "partition"}
	chanLabels = []string{"node", "topic", "partition", "channel"}

	descPubMessages = prometheus.NewDesc("partita_publish_messages_total", "Messages committed to the partition.", partLabels, nil)
	descPubBytes    = prometheus.NewDesc("partita_publish_bytes_total", "Encoded bytes committed to the partition.", partLabels, nil)
	descLogEnd      = prometheus.NewDesc("partita_partition_log_end_bytes", "Committed end offset of the partition log.", partLabels, nil)
	descTopicDepth  = prometheus.NewDesc("partita_topic_depth", "Messages waiting in a partition for its first channel.", partLabels, nil)
	descWritable    = prometheus.NewDesc("partita_partition_writable", "1 when the partition takes writes.", partLabels, nil)
	descLeader      = prometheus.NewDesc("partita_partition_is_leader", "1 when this node leads the partition.", partLabels, nil)
	descISR         = prometheus.NewDesc("partita_partition_isr_size", "In-sync replicas of the partition, as this node knows them.", partLabels, nil)
	descReplicas    = prometheus.NewDesc("partita_partition_replicas", "Configured replica count of the partition.", partLabels, nil)
	descUnder       = prometheus.NewDesc("partita_partition_under_replicated", "1 when this node leads the partition and its ISR is smaller than its replica count.", partLabels, nil)
	descDepth       = prometheus.NewDesc("partita_channel_depth", "Messages waiting for delivery on the channel.", chanLabels, nil)
	descInFlight    = prometheus.NewDesc("partita_channel_in_flight", "Messages delivered and not yet finished.", chanLabels, nil)
	descDeferred    = prometheus.NewDesc("partita_channel_deferred", "Messages deferred by DPUB or REQ with a delay.", chanLabels, nil)
	descRequeues    = prometheus.NewDesc("partita_channel_requeues_total", "REQ commands accepted.", chanLabels, nil)
	descTimeouts    = prometheus.NewDesc("partita_channel_timeouts_total", "In-flight messages that timed out.", chanLabels, nil)
	descMessages    = prometheus.NewDesc("partita_channel_messages_total", "Messages that entered the channel.", chanLabels, nil)
	descConsumers   = prometheus.NewDesc("partita_channel_consumers", "Connections subscribed to the channel.", chanLabels, nil)
)

type stateCollector struct {
	src  StatsSource
	node string
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPubMessages, descPubBytes, descLogEnd, descTopicDepth, descWritable,
		descLeader, descISR, descReplicas, descUnder,
		descDepth, descInFlight, descDeferred, descRequeues, descTimeouts, descMessages, descConsumers} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.src.Stats("") {
		p := strconv.Itoa(int(st.Partition))
		pl := []string{c.node, st.Topic, p}
		ch <- prometheus.MustNewConstMetric(descPubMessages, prometheus.CounterValue, float64(st.MessageCount), pl...)
		ch <- prometheus.MustNewConstMetric(descPubBytes, prometheus.CounterValue, float64(st.MessageBytes), pl...)
		ch <- prometheus.MustNewConstMetric(descLogEnd, prometheus.GaugeValue, float64(st.End), pl...)
		ch <- prometheus.MustNewConstMetric(descTopicDepth, prometheus.GaugeValue, float64(st.Depth), pl...)
		ch <- prometheus.MustNewConstMetric(descWritable, prometheus.GaugeValue, boolValue(st.Writable), pl...)
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, boolValue(st.Leader), pl...)
		ch <- prometheus.MustNewConstMetric(descISR, prometheus.GaugeValue, float64(st.ISR), pl...)
		ch <- prometheus.MustNewConstMetric(descReplicas, prometheus.GaugeValue, float64(st.Replicas), pl...)
		ch <- prometheus.MustNewConstMetric(descUnder, prometheus.GaugeValue, boolValue(st.Leader && st.ISR < st.Replicas), pl...)
		for _, cs := range st.Channels {
			cl := []string{c.node, st.Topic, p, cs.Name}
			s := cs.Stats
			ch <- prometheus.MustNewConstMetric(descDepth, prometheus.GaugeValue, float64(s.Depth), cl...)
			ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(s.InFlight), cl...)
			ch <- prometheus.MustNewConstMetric(descDeferred, prometheus.GaugeValue, float64(s.Deferred), cl...)
			ch <- prometheus.MustNewConstMetric(descRequeues, prometheus.CounterValue, float64(s.RequeueCount), cl...)
			ch <- prometheus.MustNewConstMetric(descTimeouts, prometheus.CounterValue, float64(s.TimeoutCount), cl...)
			ch <- prometheus.MustNewConstMetric(descMessages, prometheus.CounterValue, float64(s.MessageCount), cl...)
			ch <- prometheus.MustNewConstMetric(descConsumers, prometheus.GaugeValue, float64(len(cs.Consumers)), cl...)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
