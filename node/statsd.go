package node

import (
	"net"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/internal/memstats"
	"github.com/partitamq/partita/statsd"
)

// startStatsd pushes nsqd's metrics to --statsd-address, when set.
func (n *Node) startStatsd() {
	cfg := n.cfg
	if cfg.StatsdAddress == "" {
		return
	}
	port := n.httpLn.Addr().(*net.TCPAddr).Port
	n.stopStatsd = statsd.Start(statsd.Config{
		Address:          cfg.StatsdAddress,
		Prefix:           statsd.Prefix(cfg.StatsdPrefix, cfg.BroadcastAddress(), port),
		Interval:         cfg.StatsdInterval,
		PacketSize:       cfg.StatsdUDPPacketSize,
		ExcludeEphemeral: cfg.StatsdExcludeEphemeral,
	}, func() statsd.Sample { return statsdSample(n.broker, cfg.StatsdMemStats) }, n.log)
}

// statsdSample is the partitions this node leads, and its memory.
func statsdSample(b *broker.Broker, mem bool) statsd.Sample {
	var s statsd.Sample
	for _, st := range b.Stats("") {
		if !st.Leader {
			continue
		}
		p := statsd.Partition{Topic: st.Topic, Partition: st.Partition,
			MessageCount: st.MessageCount, MessageBytes: st.MessageBytes, Depth: st.Depth}
		var e2e []*channel.E2ESummary
		for _, ch := range st.Channels {
			p.Channels = append(p.Channels, statsd.Channel{Name: ch.Name,
				MessageCount: ch.Stats.MessageCount, Depth: ch.Stats.Depth,
				InFlight: int64(ch.Stats.InFlight), Deferred: int64(ch.Stats.Deferred),
				RequeueCount: ch.Stats.RequeueCount, TimeoutCount: ch.Stats.TimeoutCount,
				Clients: int64(len(ch.Consumers)), E2E: ch.E2E})
			e2e = append(e2e, ch.E2E)
		}
		p.E2E = channel.MergeE2E(e2e...)
		s.Partitions = append(s.Partitions, p)
	}
	if mem {
		m := memstats.Read()
		s.Memory = &m
	}
	return s
}
