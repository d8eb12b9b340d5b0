package metrics

import (
	"github.com/partitamq/partita/broker"
	"github.com/prometheus/client_golang/prometheus"
)

// descWritesOff has a series per /disable/write type rather than one
// coded value: a panel or alert reads type="all" and type="ordered"
// without a value mapping, and their sum is 1 exactly while some writes
// are refused.
var descWritesOff = prometheus.NewDesc("partita_node_writes_disabled",
	"1 for the /disable/write type in force on this node: all (it refuses every publish to a partition it leads) or ordered (only those of ordered topics); both 0 while it takes writes.",
	[]string{"node", "type"}, nil)

// writesOffCollector reads what /disable/write holds at scrape time.
type writesOffCollector struct {
	node string
	read func() broker.WritesOff
}

func (c *writesOffCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descWritesOff }

func (c *writesOffCollector) Collect(ch chan<- prometheus.Metric) {
	off := broker.WritesOn
	if c.read != nil {
		off = c.read()
	}
	for _, typ := range []broker.WritesOff{broker.WritesOffAll, broker.WritesOffOrdered} {
		ch <- prometheus.MustNewConstMetric(descWritesOff, prometheus.GaugeValue, boolValue(off == typ), c.node, typ.String())
	}
}
