package metrics

import (
	"time"

	"github.com/partitamq/partita/broker"
	"github.com/prometheus/client_golang/prometheus"
)

// liveness counts what keeps a node in the cluster, so an operator sees
// how close load brings it to falling out: the gaps between its lease
// renewals, the registrations it lost, and the peers it evicted.
type liveness struct {
	keepaliveGap prometheus.Histogram
	regLost      prometheus.Counter
	evictions    prometheus.Counter
}

// gapBuckets: a lease is renewed every sixth of its TTL (2 s by default,
// so every 0.33 s), and a gap near the TTL is a lease about to lapse.
var gapBuckets = []float64{0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10}

func newLiveness(node prometheus.Labels) liveness {
	return liveness{
		keepaliveGap: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "partita_node_lease_keepalive_gap_seconds", ConstLabels: node, Buckets: gapBuckets,
			Help: "Time between two renewals of this node's registration lease that etcd acknowledged; a gap near --node-lease-ttl is a lease about to lapse.",
		}),
		regLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partita_node_registrations_lost_total", ConstLabels: node,
			Help: "Times this node's registration lease lapsed or was revoked while it ran, so it registered again.",
		}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "partita_peer_evictions_total", ConstLabels: node,
			Help: "Peers this node evicted from the cluster because their ports refused connections (their process was gone).",
		}),
	}
}

func (l liveness) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.keepaliveGap, l.regLost, l.evictions}
}

// ObserveKeepalive records the gap between two acknowledged lease renewals.
func (m *Metrics) ObserveKeepalive(gap time.Duration) { m.liveness.keepaliveGap.Observe(gap.Seconds()) }

// RegistrationLost counts a lapsed registration.
func (m *Metrics) RegistrationLost() { m.liveness.regLost.Inc() }

// PeerEvicted counts a peer this node evicted.
func (m *Metrics) PeerEvicted() { m.liveness.evictions.Inc() }

// loadCollector reads the node's admission at scrape time.
type loadCollector struct {
	node string
	read func() broker.AdmissionState
}

var (
	descAdmissionLimit   = prometheus.NewDesc("partita_publish_admission_limit_messages", "Messages this node may have taken and not yet answered before it refuses publishes with E_PUB_TOO_MUCH_WAITING; it shrinks while a queue stands (even the quickest answer over an interval of --pub-latency-target later than it) and grows back to --max-node-pub-waiting.", nodeLabels, nil)
	descAdmissionPending = prometheus.NewDesc("partita_publish_admission_pending_messages", "Messages this node has taken and not yet answered.", nodeLabels, nil)
	descAdmitted         = prometheus.NewDesc("partita_publish_admitted_messages_total", "Messages of publishes this node took (its clients' and those forwarded to it).", nodeLabels, nil)
	descRefused          = prometheus.NewDesc("partita_publish_refused_messages_total", "Messages of publishes this node refused at once with E_PUB_TOO_MUCH_WAITING because it had its admission limit pending.", nodeLabels, nil)
	descForwardsWaiting  = prometheus.NewDesc("partita_forwards_waiting_for_leader", "Publishes waiting for their partition's leader: forwards this node makes while it knows no leader it can reach (an election in progress, a registration not seen yet, a refused connection), and publishes made on or forwarded to this node that wait for its replica to be told it leads. Each waits at most --forward-timeout.", nodeLabels, nil)
	descForwardsQueued   = prometheus.NewDesc("partita_forwards_waiting_for_connection", "Forwards waiting for a connection to their partition's leader: this node holds at most 64 to each other node, all of them carrying forwards. Those waiting go together, in one request, on the next connection freed. A forward waiting when its leadership moves goes to the next leader. Each waits at most --forward-timeout.", nodeLabels, nil)
	descSentOn           = prometheus.NewDesc("partita_publishes_sent_on_total", "Publishes sent on to their partition's next leader after a refusal that wrote nothing because the leadership had moved: publishes this node had queued for a leadership that ended, and forwards its former leader refused. A write in flight when a leadership ends is never sent on: it may be in the next leader's log.", nodeLabels, nil)
	descAdmissionCuts    = prometheus.NewDesc("partita_publish_admission_cuts_total", "Times a standing queue shrank this node's admission limit.", nodeLabels, nil)
)

func (c *loadCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descAdmissionLimit, descAdmissionPending, descAdmitted, descRefused, descAdmissionCuts, descForwardsWaiting, descForwardsQueued, descSentOn} {
		ch <- d
	}
}

func (c *loadCollector) Collect(ch chan<- prometheus.Metric) {
	var r broker.AdmissionState
	if c.read != nil {
		r = c.read()
	}
	ch <- prometheus.MustNewConstMetric(descAdmissionLimit, prometheus.GaugeValue, float64(r.Limit), c.node)
	ch <- prometheus.MustNewConstMetric(descAdmissionPending, prometheus.GaugeValue, float64(r.Pending), c.node)
	ch <- prometheus.MustNewConstMetric(descAdmitted, prometheus.CounterValue, float64(r.Admitted), c.node)
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(r.Refused), c.node)
	ch <- prometheus.MustNewConstMetric(descAdmissionCuts, prometheus.CounterValue, float64(r.Cuts), c.node)
	ch <- prometheus.MustNewConstMetric(descForwardsWaiting, prometheus.GaugeValue, float64(r.ForwardsWaiting), c.node)
	ch <- prometheus.MustNewConstMetric(descForwardsQueued, prometheus.GaugeValue, float64(r.ForwardsQueued), c.node)
	ch <- prometheus.MustNewConstMetric(descSentOn, prometheus.CounterValue, float64(r.SentOn), c.node)
}
