package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// overloadDuration is how long the overload lasts; PARTITA_OVERLOAD_DURATION
// runs it longer (docs/operations.md, "Under overload").
func overloadDuration(t *testing.T) time.Duration {
	return envDuration(t, "PARTITA_OVERLOAD_DURATION", 4*time.Second)
}

// livenessCounters are the metrics a node counts when load takes the
// cluster apart: each must stay where it was through an overload.
var livenessCounters = []string{
	"partita_isr_shrinks_total",
	"partita_leader_elections_total",
	"partita_node_registrations_lost_total",
	"partita_peer_evictions_total",
}

// Three nodes with 300 partitions are offered more spread PUBs than they
// admit: four connections to each node keep up to 6,000 PUBs outstanding
// each, round robin over the partitions the node leads, for 4 s, against
// an admission limit of 4,000 a node (--max-node-pub-waiting). A cluster
// that writes faster than the test's client can send, as under the race
// detector, keeps fewer outstanding than the default limit of 20,000 and
// is never pushed past it; with the smaller limit the client's most is
// more than a node admits whatever the machine's speed, while the nodes
// and the client still saturate its cores. The cluster bends: some
// publishes are refused at once with E_PUB_TOO_MUCH_WAITING, none fails
// otherwise, every one is answered within the write timeout, no follower
// leaves an ISR, no leader is elected, no registration lapses, no node is
// evicted, and every acknowledged message is delivered afterwards.
func TestOverloadBendsNeverBreaks(t *testing.T) {
	c := startCluster(t, 3, append([]string{"--max-node-pub-waiting", "4000"}, strings.Fields(os.Getenv("PARTITA_OVERLOAD_NODE_ARGS"))...)...)
	const topics, perTopic = 3, 100
	var names []string
	var all []part
	for i := range topics {
		name := fmt.Sprintf("spread%d", i)
		if code, body := testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=%s&partition_num=%d&replicator=3", name, perTopic), ""); code != 200 {
			t.Fatalf("creating %s: %d %s", name, code, body)
		}
		if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/channel/create?topic="+name+"&channel=check", ""); code != 200 {
			t.Fatalf("creating %s's channel: %d %s", name, code, body)
		}
		names = append(names, name)
		for p := range perTopic {
			all = append(all, part{name, int32(p)})
		}
	}
	// Every partition takes a first PUB on its leader, so the overload
	// starts on a cluster whose leaders are all in place.
	acked := map[string]bool{}
	first := func(p part) string { return fmt.Sprintf("first-%s-%d", p.topic, p.p) }
	pending := all
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == 50 {
			t.Fatalf("%d partitions never took their first PUB", len(pending))
		}
		ok, _, _ := c.pubToLeaders(names, "", pending, first)
		pending = unacked(pending, ok, acked, first)
	}
	byNode := map[string][]part{}
	for _, name := range names {
		states, err := c.assign.List(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			byNode[st.Leader] = append(byNode[st.Leader], part{name, st.Partition})
		}
	}
	before := map[string]map[string]float64{}
	for id, n := range c.nodes {
		before[id] = scrapeSums(t, n.HTTP, livenessCounters)
	}

	var mu sync.Mutex
	var load overloadResult
	var wg sync.WaitGroup
	deadline := time.Now().Add(overloadDuration(t))
	stop := func() bool { return !time.Now().Before(deadline) }
	for id, ps := range byNode {
		for conn := range overloadConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := overloadConn(c.nodes[id].TCP, ps, fmt.Sprintf("%s-%d", id, conn), overloadConnWindow, stop)
				mu.Lock()
				load.add(r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	t.Logf("overload for %v: %d PUBs acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING, %d failed otherwise (%s), %d unanswered; slowest answer %v",
		overloadDuration(t), len(load.acked), load.refused, load.failed, load.firstFailure, load.unanswered, load.slowest.Round(time.Millisecond))
	if t.Failed() || os.Getenv("PARTITA_OVERLOAD_LOGS") != "" {
		for id, n := range c.nodes {
			t.Logf("%s's log:\n%s", id, n.Log)
		}
	}
	if load.failed > 0 || load.unanswered > 0 {
		t.Errorf("%d PUBs failed other than by a refusal (first: %s) and %d were never answered", load.failed, load.firstFailure, load.unanswered)
	}
	if load.refused == 0 {
		t.Errorf("no PUB refused: the cluster was not loaded past what it can write, so the test proves nothing")
	}
	if !raceEnabled && load.slowest > 5*time.Second {
		t.Errorf("a PUB waited %v for its answer, past the 5 s write timeout", load.slowest)
	}
	for id, n := range c.nodes {
		after := scrapeSums(t, n.HTTP, livenessCounters)
		for _, name := range livenessCounters {
			if d := after[name] - before[id][name]; d != 0 {
				t.Errorf("%s: %s rose by %v during the overload", id, name, d)
			}
		}
	}
	if got := scrapeSums(t, c.nodes["n1"].HTTP, []string{"partita_cluster_partitions_without_leader"}); got["partita_cluster_partitions_without_leader"] != 0 {
		t.Errorf("%v partitions without a leader after the overload", got["partita_cluster_partitions_without_leader"])
	}
	for b := range load.acked {
		acked[b] = true
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logUndelivered(t, "", names, "check")
		}
	})
	var lookups []string
	for _, n := range c.nodes {
		lookups = append(lookups, n.HTTP)
	}
	for _, name := range names {
		want := map[string]bool{}
		for b := range acked {
			if strings.Contains(b, "-"+name+"-") {
				want[b] = true
			}
		}
		deliversAllInFlight(t, lookups, name, "check", 3000, want)
	}
}

// overloadResult is what the overload's connections saw.
type overloadResult struct {
	acked                       map[string]bool
	refused, failed, unanswered int
	firstFailure                string
	slowest                     time.Duration
}

func (r *overloadResult) add(o overloadResult) {
	if r.acked == nil {
		r.acked = map[string]bool{}
	}
	for b := range o.acked {
		r.acked[b] = true
	}
	r.refused += o.refused
	r.failed += o.failed
	r.unanswered += o.unanswered
	if r.firstFailure == "" {
		r.firstFailure = o.firstFailure
	}
	r.slowest = max(r.slowest, o.slowest)
}

// overloadConns and overloadConnWindow are the overload test's
// connections to each node and the most PUBs each keeps unanswered:
// together more than the test's admission limit a node.
const (
	overloadConns      = 4
	overloadConnWindow = 6000
)

// overloadWindow is how many PUBs a connection of the fault suite's
// flood keeps unanswered: far more than a node writes in the time it aims
// to answer within, so the offered load is whatever the client can send.
const overloadWindow = 2000

// overloadConn publishes round robin over partitions on one connection
// until stop says so, keeping window PUBs unanswered, and reads every
// answer; answers come back in the order of the PUBs.
func overloadConn(addr string, partitions []part, name string, window int, stop func() bool) overloadResult {
	res := overloadResult{acked: map[string]bool{}}
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		res.failed, res.firstFailure = 1, err.Error()
		return res
	}
	defer conn.Close()
	type sent struct {
		body string
		at   time.Time
	}
	inFlight := make(chan sent, window)
	go func() {
		defer close(inFlight)
		w := bufio.NewWriter(conn)
		w.WriteString(protocol.MagicV2)
		for i := 0; !stop(); i++ {
			p := partitions[i%len(partitions)]
			b := fmt.Sprintf("%s-%s-%d-%d", name, p.topic, p.p, i)
			fmt.Fprintf(w, "PUB %s %d\n", p.topic, p.p)
			binary.Write(w, binary.BigEndian, uint32(len(b)))
			w.WriteString(b)
			s := sent{b, time.Now()}
			select {
			case inFlight <- s:
			default:
				// The window is full: what is buffered goes out, and the
				// writer waits for an answer to make room.
				if w.Flush() != nil {
					return
				}
				inFlight <- s
			}
		}
		w.Flush()
	}()
	r := bufio.NewReader(conn)
	for s := range inFlight {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		typ, data, err := protocol.ReadFrame(r)
		for err == nil && typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			typ, data, err = protocol.ReadFrame(r)
		}
		if err != nil {
			res.unanswered++
			for range inFlight {
				res.unanswered++
			}
			if res.firstFailure == "" {
				res.firstFailure = err.Error()
			}
			return res
		}
		res.slowest = max(res.slowest, time.Since(s.at))
		switch {
		case typ == protocol.FrameTypeResponse && string(data) == "OK":
			res.acked[s.body] = true
		case typ == protocol.FrameTypeError && strings.HasPrefix(string(data), "E_PUB_TOO_MUCH_WAITING"):
			res.refused++
		default:
			res.failed++
			if res.firstFailure == "" {
				res.firstFailure = string(data)
			}
		}
	}
	return res
}

// scrapeClient reads a node's /metrics; a node that cannot answer in 30 s
// fails the test rather than hang it.
var scrapeClient = &http.Client{Timeout: 30 * time.Second}

// scrapeMetrics is a node's /metrics.
func scrapeMetrics(t *testing.T, hostport string) string {
	t.Helper()
	resp, err := scrapeClient.Get("http://" + hostport + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// scrapeSums sums each named metric family's samples in a node's /metrics.
func scrapeSums(t *testing.T, hostport string, names []string) map[string]float64 {
	t.Helper()
	body := scrapeMetrics(t, hostport)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	sums := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(series, "#") {
			continue
		}
		name, _, _ := strings.Cut(series, "{")
		if !want[name] {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			sums[name] += v
		}
	}
	return sums
}
