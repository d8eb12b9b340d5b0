package metrics

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	partLabels = []string{"node", "topic", "partition"}
	chanLabels = []string{"node", "topic", "partition", "channel"}
	nodeLabels = []string{"node"}

	// descE2E's label is percentile, not quantile, which Prometheus keeps
	// for summaries: these are gauges of estimates.
	descE2E = prometheus.NewDesc(e2eName, e2eHelp, append(slices.Clone(chanLabels), "percentile"), nil)

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

	mu sync.Mutex // scrapes may overlap
	// seen holds each hosted partition's followers as of the last scrape
	// that asked the actors: their event series exist already.
	seen map[[2]string]string
	disk *diskUsage
}

// clusterDescs are the families read from the metadata; statsDescs those
// read from the partition and channel actors at scrape time.
var clusterDescs = []*prometheus.Desc{descController, descLiveNodes, descPartitions, descNoLeader, descClusterUnder, descClusterCatch, descOffPreferred, descClusterMoving, descClusterMoveIn, descMetadataError}

func statsDescs() []*prometheus.Desc {
	var ds []*prometheus.Desc
	for _, f := range partFamilies {
		ds = append(ds, f.desc)
	}
	for _, f := range chanFamilies {
		ds = append(ds, f.desc)
	}
	return append(ds, e2eCountFamily.desc, descE2E)
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.m.events {
		v.vec.Describe(ch)
	}
	for _, d := range statsDescs() {
		ch <- d
	}
	for _, d := range clusterDescs {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectStats(ch)
	for _, v := range c.m.events {
		v.vec.Collect(ch)
	}
	c.collectCluster(ch)
}

// scrapeRows are the actors' figures of one scrape, a row per hosted
// partition and per channel.
type scrapeRows struct {
	parts []partRow
	chans []chanRow
}

// rows asks every partition and channel actor for its figures, and makes
// the event series of every hosted partition exist.
func (c *stateCollector) rows() scrapeRows {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	stats := c.src.Stats("")
	seen := make(map[[2]string]string, len(stats))
	if c.disk == nil {
		c.disk = newDiskUsage()
	}
	r := scrapeRows{parts: make([]partRow, len(stats))}
	for i, st := range stats {
		p := partitionLabel(st.Partition)
		key, followers := [2]string{st.Topic, p}, strings.Join(st.Followers, ",")
		seen[key] = followers
		if prev, ok := c.seen[key]; !ok || prev != followers {
			c.precreate(st.Topic, p, st.Followers)
		}
		r.parts[i] = partRow{st: st, partition: p, disk: c.disk.bytes(st.Dir, st.End, st.Records, now)}
		for j := range st.Channels {
			r.chans = append(r.chans, chanRow{part: &r.parts[i], cs: &st.Channels[j], now: now})
		}
	}
	c.forgetMissing(seen)
	c.disk.forget(now)
	return r
}

// collectStats is rows as client library metrics.
func (c *stateCollector) collectStats(ch chan<- prometheus.Metric) {
	r := c.rows()
	node := c.m.node
	for _, f := range partFamilies {
		for i := range r.parts {
			p := &r.parts[i]
			ch <- prometheus.MustNewConstMetric(f.desc, f.kind, f.value(p), node, p.st.Topic, p.partition)
		}
	}
	for _, f := range chanFamilies {
		for i := range r.chans {
			ch <- chanMetric(f, &r.chans[i], node)
		}
	}
	for i := range r.chans {
		cr := &r.chans[i]
		if cr.cs.E2E == nil {
			continue
		}
		ch <- chanMetric(e2eCountFamily, cr, node)
		for _, q := range cr.cs.E2E.Percentiles() {
			ch <- prometheus.MustNewConstMetric(descE2E, prometheus.GaugeValue, q.Value/1e9,
				node, cr.part.st.Topic, cr.part.partition, cr.cs.Name, percentileLabel(q.Quantile))
		}
	}
}

func chanMetric(f chanFamily, r *chanRow, node string) prometheus.Metric {
	return prometheus.MustNewConstMetric(f.desc, f.kind, f.value(r), node, r.part.st.Topic, r.part.partition, r.cs.Name)
}

func percentileLabel(q float64) string { return strconv.FormatFloat(q*100, 'g', -1, 64) }

// statsPart and clusterPart are a stateCollector's two reads as
// collectors of their own, for scrapes that name their families
// (Metrics.Handler): a scrape of cluster figures asks no actor.
type statsPart struct{ *stateCollector }

func (c statsPart) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range statsDescs() {
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
func (c *stateCollector) forgetMissing(seen map[[2]string]string) {
	for k := range c.seen {
		if _, ok := seen[k]; !ok {
			for _, v := range c.m.events {
				v.vec.DeletePartialMatch(prometheus.Labels{"topic": k[0], "partition": k[1]})
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
