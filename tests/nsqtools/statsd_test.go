package nsqtools

import (
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
)

// nsqd v1.3.0 and a Partita cluster push to statsd listeners of their own,
// each with a go-nsq producer and consumer on a topic and channel of the
// same names, and end-to-end latency percentiles configured: Partita sends every name nsqd sends, with the same type (a
// dashboard built on nsqd's keys reads it), plus its partitions' own
// series, and nothing else.
func TestStatsdNamesMatchNSQD(t *testing.T) {
	fromNSQ, fromPartita := listenStatsd(t), listenStatsd(t)
	e2e := []string{"--e2e-processing-latency-percentile", "0.99,0.5"}
	nodes := startCluster(t, append([]string{"--statsd-address", fromPartita.addr, "--statsd-interval", "1s"}, e2e...)...)
	// nsqd spreads a push over its interval less a second, and panics
	// on an interval of one second.
	_, nsqdHTTP, nsqdTCP := startNSQ(t, append([]string{"--statsd-address", fromNSQ.addr, "--statsd-interval", "2s"}, e2e...)...)

	const topic, channel = "statsd", "c1"
	createTopic(t, nodes, topic, channel)
	mustPost(t, nsqdHTTP+"/topic/create?topic="+topic, "")
	mustPost(t, nsqdHTTP+"/channel/create?topic="+topic+"&channel="+channel, "")
	connectClients(t, nsqdTCP, topic, channel)
	connectClients(t, leaderOf(t, nodes, topic).tcp, topic, channel)

	last := "topic." + topic + ".channel." + channel + ".e2e_processing_latency_50|g"
	defer func() {
		if t.Failed() {
			t.Logf("nsqd sent %q\nPartita sent %q", fromNSQ.names(), fromPartita.names())
		}
	}()
	eventually(t, "both pushed the channel's metrics", func() bool {
		return slices.Contains(fromNSQ.names(), last) && slices.Contains(fromPartita.names(), last) &&
			slices.Contains(fromNSQ.names(), "mem.gc_runs|c") && slices.Contains(fromPartita.names(), "mem.gc_runs|c")
	})
	want := fromNSQ.names()
	var got, partitions []string
	for _, n := range fromPartita.names() {
		if strings.HasPrefix(n, "partition.") {
			partitions = append(partitions, n)
			continue
		}
		got = append(got, n)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Partita's statsd names and types:\n%s\nnsqd's:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, n := range []string{"partition." + topic + ".0.message_count|c", "partition." + topic + ".2.channel." + channel + ".depth|g"} {
		if !slices.Contains(partitions, n) {
			t.Errorf("no %s among the partitions' series %q", n, partitions)
		}
	}
}

// statsdListener records the names and types of the statsd lines it is
// sent, without their prefix (nsq.<host key>.).
type statsdListener struct {
	addr string
	mu   sync.Mutex
	seen map[string]bool
}

func listenStatsd(t *testing.T) *statsdListener {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	l := &statsdListener{addr: c.LocalAddr().String(), seen: map[string]bool{}}
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			for _, line := range strings.Split(strings.TrimSpace(string(buf[:n])), "\n") {
				l.note(t, line)
			}
		}
	}()
	return l
}

func (l *statsdListener) note(t *testing.T, line string) {
	name, rest, ok := strings.Cut(line, ":")
	_, kind, ok2 := strings.Cut(rest, "|")
	parts := strings.SplitN(name, ".", 3)
	if !ok || !ok2 || len(parts) != 3 || parts[0] != "nsq" {
		t.Errorf("statsd line %q is not nsq.<host>.<name>:<value>|<type>", line)
		return
	}
	l.mu.Lock()
	l.seen[parts[2]+"|"+kind] = true
	l.mu.Unlock()
}

func (l *statsdListener) names() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]string, 0, len(l.seen))
	for n := range l.seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
