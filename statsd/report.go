// Package statsd pushes a node's figures to a statsd daemon over UDP, with
// nsqd's metric names and types, so dashboards built for nsqd read a
// Partita cluster: per topic and channel, summed over the partitions the
// node leads (a follower's copy would count each message once per
// replica), and the node's memory. Each partition also has series of its
// own under partition.<topic>.<partition>.
package statsd

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/internal/memstats"
)

// Sample is what one push reports: the partitions the node leads, and its
// memory when memory stats are on.
type Sample struct {
	Partitions []Partition
	Memory     *memstats.Stats
}

// Partition is one led partition's figures; the counts are totals since
// the partition began.
type Partition struct {
	Topic        string
	Partition    int32
	MessageCount int64
	MessageBytes int64
	Depth        int64
	Channels     []Channel
	// E2E is the partition's channels' end-to-end latency together; nil
	// unless tracked.
	E2E *channel.E2ESummary
}

// Channel is one channel of a partition.
type Channel struct {
	Name         string
	MessageCount int64
	Depth        int64
	InFlight     int64
	Deferred     int64
	RequeueCount int64
	TimeoutCount int64
	Clients      int64
	E2E          *channel.E2ESummary
}

// Report is the statsd lines, without the prefix, for cur after prev (the
// sample of the push before, or an empty one). Counters carry what was
// counted since prev; a partition prev did not have adds nothing to them
// this time, so one that moved here does not count its whole past. Topics
// and channels ending in #ephemeral are left out when excludeEphemeral.
func Report(prev, cur Sample, excludeEphemeral bool) []string {
	before := make(map[partitionKey]Partition, len(prev.Partitions))
	for _, p := range prev.Partitions {
		before[partitionKey{p.Topic, p.Partition}] = p
	}
	var topics []string
	byTopic := map[string]*totals{}
	var lines []string
	for _, p := range cur.Partitions {
		if excludeEphemeral && ephemeral(p.Topic) {
			continue
		}
		d := since(before, p, excludeEphemeral)
		t := byTopic[p.Topic]
		if t == nil {
			t = &totals{channels: map[string]*Channel{}, chE2E: map[string][]*channel.E2ESummary{}}
			byTopic[p.Topic] = t
			topics = append(topics, p.Topic)
		}
		t.add(d)
		lines = d.lines(fmt.Sprintf("partition.%s.%d.", p.Topic, p.Partition), lines)
	}
	var out []string
	for _, name := range topics {
		out = byTopic[name].lines("topic."+name+".", out)
	}
	out = append(out, lines...)
	if cur.Memory != nil {
		out = memoryLines(prev.Memory, *cur.Memory, out)
	}
	return out
}

type partitionKey struct {
	topic     string
	partition int32
}

func ephemeral(name string) bool { return strings.HasSuffix(name, "#ephemeral") }

// since is p with its counters turned into what they counted since the
// same partition in before: nothing when before lacks it, everything when
// a counter went back (the partition was emptied or made anew).
func since(before map[partitionKey]Partition, p Partition, excludeEphemeral bool) Partition {
	last, seen := before[partitionKey{p.Topic, p.Partition}]
	delta := func(now, then int64) int64 {
		switch {
		case !seen:
			return 0
		case now < then:
			return now
		}
		return now - then
	}
	d := p
	d.MessageCount = delta(p.MessageCount, last.MessageCount)
	d.MessageBytes = delta(p.MessageBytes, last.MessageBytes)
	d.Channels = nil
	for _, c := range p.Channels {
		if excludeEphemeral && ephemeral(c.Name) {
			continue
		}
		var lc Channel
		for _, x := range last.Channels {
			if x.Name == c.Name {
				lc = x
			}
		}
		c.MessageCount = delta(c.MessageCount, lc.MessageCount)
		c.RequeueCount = delta(c.RequeueCount, lc.RequeueCount)
		c.TimeoutCount = delta(c.TimeoutCount, lc.TimeoutCount)
		d.Channels = append(d.Channels, c)
	}
	return d
}

// totals gathers a topic's partitions; the latencies are merged once, at
// the end.
type totals struct {
	Partition
	names    []string
	channels map[string]*Channel
	e2e      []*channel.E2ESummary
	chE2E    map[string][]*channel.E2ESummary
}

func (t *totals) add(p Partition) {
	t.MessageCount += p.MessageCount
	t.MessageBytes += p.MessageBytes
	t.Depth += p.Depth
	t.e2e = append(t.e2e, p.E2E)
	for _, c := range p.Channels {
		sum := t.channels[c.Name]
		if sum == nil {
			sum = &Channel{Name: c.Name}
			t.channels[c.Name] = sum
			t.names = append(t.names, c.Name)
		}
		sum.MessageCount += c.MessageCount
		sum.Depth += c.Depth
		sum.InFlight += c.InFlight
		sum.Deferred += c.Deferred
		sum.RequeueCount += c.RequeueCount
		sum.TimeoutCount += c.TimeoutCount
		sum.Clients += c.Clients
		t.chE2E[c.Name] = append(t.chE2E[c.Name], c.E2E)
	}
}

func (t *totals) lines(prefix string, out []string) []string {
	p := t.Partition
	p.E2E = channel.MergeE2E(t.e2e...)
	p.Channels = p.Channels[:0]
	for _, n := range t.names {
		c := *t.channels[n]
		c.E2E = channel.MergeE2E(t.chE2E[n]...)
		p.Channels = append(p.Channels, c)
	}
	return p.lines(prefix, out)
}

// lines are nsqd's topic and channel metrics under prefix, in nsqd's order.
func (p Partition) lines(prefix string, out []string) []string {
	out = append(out,
		counter(prefix+"message_count", p.MessageCount),
		counter(prefix+"message_bytes", p.MessageBytes),
		gauge(prefix+"depth", p.Depth),
		gauge(prefix+"backend_depth", p.Depth))
	out = e2eLines(prefix, p.E2E, out)
	for _, c := range p.Channels {
		cp := prefix + "channel." + c.Name + "."
		out = append(out,
			counter(cp+"message_count", c.MessageCount),
			gauge(cp+"depth", c.Depth),
			gauge(cp+"backend_depth", c.Depth),
			gauge(cp+"in_flight_count", c.InFlight),
			gauge(cp+"deferred_count", c.Deferred),
			counter(cp+"requeue_count", c.RequeueCount),
			counter(cp+"timeout_count", c.TimeoutCount),
			gauge(cp+"clients", c.Clients))
		out = e2eLines(cp, c.E2E, out)
	}
	return out
}

// e2eLines are nsqd's e2e_processing_latency_<percent> gauges, in
// nanoseconds, the percent rounded to a whole number as nsqd names them.
func e2eLines(prefix string, s *channel.E2ESummary, out []string) []string {
	for _, p := range s.Percentiles() {
		out = append(out, gauge(fmt.Sprintf("%se2e_processing_latency_%.0f", prefix, p.Quantile*100), int64(p.Value)))
	}
	return out
}

func memoryLines(prev *memstats.Stats, m memstats.Stats, out []string) []string {
	runs := int64(m.GCTotalRuns)
	if prev != nil {
		runs -= int64(prev.GCTotalRuns)
	}
	return append(out,
		gauge("mem.heap_objects", int64(m.HeapObjects)),
		gauge("mem.heap_idle_bytes", int64(m.HeapIdleBytes)),
		gauge("mem.heap_in_use_bytes", int64(m.HeapInUseBytes)),
		gauge("mem.heap_released_bytes", int64(m.HeapReleasedBytes)),
		gauge("mem.gc_pause_usec_100", int64(m.GCPauseUsec100)),
		gauge("mem.gc_pause_usec_99", int64(m.GCPauseUsec99)),
		gauge("mem.gc_pause_usec_95", int64(m.GCPauseUsec95)),
		gauge("mem.next_gc_bytes", int64(m.NextGCBytes)),
		counter("mem.gc_runs", runs))
}

func counter(name string, v int64) string { return fmt.Sprintf("%s:%d|c", name, v) }
func gauge(name string, v int64) string   { return fmt.Sprintf("%s:%d|g", name, v) }

// Packets joins lines, each prefixed and ended by a newline, into payloads
// of at most size bytes, breaking only between lines; a line longer than
// size goes alone.
func Packets(prefix string, lines []string, size int) [][]byte {
	var out [][]byte
	var cur []byte
	for _, l := range lines {
		n := len(prefix) + len(l) + 1
		if len(cur) > 0 && len(cur)+n > size {
			out = append(out, cur)
			cur = nil
		}
		cur = append(append(append(cur, prefix...), l...), '\n')
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Prefix is --statsd-prefix with %s replaced by the node's host key (its
// broadcast address and HTTP port, dots and colons made underscores, as
// nsqd makes it), ending in a dot; empty stays empty.
func Prefix(pattern, broadcastAddress string, httpPort int) string {
	if pattern == "" {
		return ""
	}
	key := strings.NewReplacer(".", "_", ":", "_").Replace(net.JoinHostPort(broadcastAddress, strconv.Itoa(httpPort)))
	p := strings.ReplaceAll(pattern, "%s", key)
	if !strings.HasSuffix(p, ".") {
		p += "."
	}
	return p
}
