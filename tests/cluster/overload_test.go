package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/flood"
	"github.com/partitamq/partita/internal/testnode"
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
// that writes faster than its client can send keeps fewer outstanding
// than the default limit of 20,000 and is never pushed past it; with the
// smaller limit the client's most is more than a node admits whatever the
// machine's speed, while the nodes and the client still saturate its
// cores. The client is a process of its own (internal/flood/floodpub),
// built without the race detector, so the load does not shrink when the
// test binary is built with it. The cluster bends: some
// publishes are refused at once with E_PUB_TOO_MUCH_WAITING, none fails
// otherwise, every one is answered within the write timeout, no follower
// leaves an ISR, no leader is elected, no registration lapses, no node is
// evicted, and every acknowledged message is delivered afterwards.
func TestOverloadBendsNeverBreaks(t *testing.T) {
	c := startCluster(t, 3, append([]string{"--max-node-pub-waiting", "4000"}, strings.Fields(os.Getenv("PARTITA_OVERLOAD_NODE_ARGS"))...)...)
	names, byNode, acked := spreadTopics(t, c)
	before := map[string]map[string]float64{}
	for id, n := range c.nodes {
		before[id] = scrapeSums(t, n.HTTP, livenessCounters)
	}

	targets := map[string][]string{}
	for id, ps := range byNode {
		for _, p := range ps {
			targets[id] = append(targets[id], fmt.Sprintf("%s:%d", p.topic, p.p))
		}
	}
	load := startFloods(t, c, targets)()
	t.Logf("overload for %v: %d PUBs acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING, %d failed otherwise (%s), %d unanswered; slowest answer %v; a connection's window full %d times",
		overloadDuration(t), len(load.Acked), load.Refused, load.Failed, load.FirstFailure, load.Unanswered, load.Slowest.Round(time.Millisecond), load.HeldBack)
	if t.Failed() || os.Getenv("PARTITA_OVERLOAD_LOGS") != "" {
		for id, n := range c.nodes {
			t.Logf("%s's log:\n%s", id, n.Log)
		}
	}
	if load.Failed > 0 || load.Unanswered > 0 {
		t.Errorf("%d PUBs failed other than by a refusal (first: %s) and %d were never answered", load.Failed, load.FirstFailure, load.Unanswered)
	}
	if load.Refused == 0 {
		t.Errorf("no PUB refused: the cluster was not loaded past what it can write, so the test proves nothing")
	}
	if !raceEnabled && load.Slowest > 5*time.Second {
		t.Errorf("a PUB waited %v for its answer, past the 5 s write timeout", load.Slowest)
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
	for _, b := range load.Acked {
		acked[b] = true
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logUndelivered(t, "", names, "check")
		}
	})
	deliversEachTopic(t, c.lookups(), names, acked)
}

// deliversEachTopic consumes each topic's channel "check" until every
// acknowledged body of the topic came.
func deliversEachTopic(t *testing.T, lookups, names []string, acked map[string]bool) {
	t.Helper()
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

// The overload of TestOverloadBendsNeverBreaks through a kill -9: the two
// nodes that will survive are flooded with the partitions they lead and
// half each of the third node's (forwarded to it), and once either has
// refused a publish, the cluster past what it can write, the third node
// is killed. Its partitions fail over in the middle of the overload, and
// the cluster still bends: publishes are refused with
// E_PUB_TOO_MUCH_WAITING, and fail only with E_FAILED_ON_NOT_WRITABLE and
// only on the killed node's partitions while they have no leader; every
// publish is answered within the write timeout; the survivors keep their
// registrations, evict no one but the killed node, shrink out of ISRs no
// one but it, and elect each of its partitions a leader once and nothing
// else; and every acknowledged message is delivered afterwards.
func TestOverloadThroughAKill(t *testing.T) {
	c := startCluster(t, 3, append([]string{"--max-node-pub-waiting", "4000"}, strings.Fields(os.Getenv("PARTITA_OVERLOAD_NODE_ARGS"))...)...)
	names, byNode, acked := spreadTopics(t, c)
	const victim = "n3"
	survivors := []string{"n1", "n2"}
	lost := map[string]bool{}
	targets := map[string][]string{}
	for i, p := range byNode[victim] {
		lost[p.topic+"/"+strconv.Itoa(int(p.p))] = true
		id := survivors[i%len(survivors)]
		targets[id] = append(targets[id], fmt.Sprintf("%s:%d", p.topic, p.p))
	}
	for _, id := range survivors {
		for _, p := range byNode[id] {
			targets[id] = append(targets[id], fmt.Sprintf("%s:%d", p.topic, p.p))
		}
	}
	before := map[string]map[string]float64{}
	for _, id := range survivors {
		before[id] = scrapeSums(t, c.nodes[id].HTTP, livenessCounters)
	}

	floods := startFloods(t, c, targets)
	refusing := time.Now()
	testnode.Eventually(t, overloadDuration(t), fmt.Sprintf("%v to refuse a publish, so that the kill comes in an overload", survivors), func() bool {
		return slices.ContainsFunc(survivors, func(id string) bool { return refusedAPublish(c.nodes[id].HTTP) })
	})
	c.nodes[victim].Kill(t)
	killed := time.Since(refusing)
	load := floods()
	t.Logf("overload for %v, %s killed %v in: %d PUBs acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING, %d failed otherwise (first: %s) on %d partitions, %d unanswered; slowest answer %v",
		overloadDuration(t), victim, killed.Round(time.Millisecond), len(load.Acked), load.Refused, load.Failed, load.FirstFailure, len(load.Failures), load.Unanswered, load.Slowest.Round(time.Millisecond))
	if t.Failed() || os.Getenv("PARTITA_OVERLOAD_LOGS") != "" {
		for _, id := range survivors {
			t.Logf("%s's log:\n%s", id, c.nodes[id].Log)
		}
	}
	if load.Unanswered > 0 {
		t.Errorf("%d PUBs were never answered", load.Unanswered)
	}
	for k, n := range load.Failures {
		code, target, _ := strings.Cut(k, " ")
		if code != "E_FAILED_ON_NOT_WRITABLE" || !lost[target] {
			t.Errorf("%d PUBs to %s failed with %s, which the kill of %s does not explain (first failure: %s)", n, target, code, victim, load.FirstFailure)
		}
	}
	if load.Refused == 0 {
		t.Errorf("no PUB refused: the cluster was not loaded past what it can write, so the test proves nothing")
	}
	if !raceEnabled && load.Slowest > 5*time.Second {
		t.Errorf("a PUB waited %v for its answer, past the 5 s write timeout", load.Slowest)
	}
	var elected float64
	for _, id := range survivors {
		after := scrapeSums(t, c.nodes[id].HTTP, livenessCounters)
		d := func(name string) float64 { return after[name] - before[id][name] }
		if d("partita_node_registrations_lost_total") != 0 {
			t.Errorf("%s lost its registration %v times", id, d("partita_node_registrations_lost_total"))
		}
		if d("partita_peer_evictions_total") > 1 {
			t.Errorf("%s evicted %v peers: only %s is gone", id, d("partita_peer_evictions_total"), victim)
		}
		elected += d("partita_leader_elections_total")
		for _, line := range strings.Split(c.nodes[id].Log.String(), "\n") {
			if !strings.Contains(line, `msg="ISR shrunk"`) {
				continue
			}
			_, isr, _ := strings.Cut(line, ` isr="[`)
			isr, _, _ = strings.Cut(isr, "]")
			members := strings.Fields(isr)
			for _, s := range survivors {
				if !slices.Contains(members, s) {
					t.Errorf("%s shrank a live follower out of an ISR: %s", id, line)
					break
				}
			}
		}
	}
	if int(elected) != len(byNode[victim]) {
		t.Errorf("%v leaderships began on the survivors, want one for each of the %d partitions %s led", elected, len(byNode[victim]), victim)
	}
	for _, name := range names {
		states, err := c.assign.List(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			if st.Leader == "" || st.Leader == victim {
				t.Errorf("%s/%d has no live leader after the overload: %+v", name, st.Partition, st)
			}
		}
	}
	for _, b := range load.Acked {
		acked[b] = true
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.logUndelivered(t, victim, names, "check")
		}
	})
	var lookups []string
	for _, id := range survivors {
		lookups = append(lookups, c.nodes[id].HTTP)
	}
	deliversEachTopic(t, lookups, names, acked)
}

// refusedAPublish reports whether the node at hostport has refused a
// publish with E_PUB_TOO_MUCH_WAITING since it started; a node that does
// not answer has not.
func refusedAPublish(hostport string) bool {
	// Only the one family: the node gathers what name[] asks for alone,
	// and this is read every few milliseconds of an overload.
	resp, err := scrapeClient.Get("http://" + hostport + "/metrics?name[]=partita_publish_refused_messages_total")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	const refused = "partita_publish_refused_messages_total"
	return sumFamilies(string(body), []string{refused})[refused] > 0
}

// startFloods floods each node of targets with pipelined PUBs to its
// "topic:partition" targets for overloadDuration, and returns the wait for
// what they were answered. Each flood is a process of its own, built
// without the race detector: a client slowed by the detector, on a machine
// busy with other tests, sends fewer PUBs than the nodes write.
func startFloods(t *testing.T, c *testCluster, targets map[string][]string) (wait func() flood.Result) {
	t.Helper()
	flooder := testnode.Program(t, "./internal/flood/floodpub")
	var mu sync.Mutex
	var load flood.Result
	var wg sync.WaitGroup
	for id, ts := range targets {
		wg.Go(func() {
			r, err := runFlood(flooder, "-addr", c.nodes[id].TCP, "-partitions", strings.Join(ts, ","),
				"-name", id, "-conns", strconv.Itoa(overloadConns), "-window", strconv.Itoa(overloadConnWindow),
				"-for", overloadDuration(t).String())
			if err != nil {
				t.Errorf("flooding %s: %v", id, err)
			}
			mu.Lock()
			load.Add(r)
			mu.Unlock()
		})
	}
	return func() flood.Result {
		wg.Wait()
		return load
	}
}

// spreadTopics creates the overload tests' 300 partitions, three topics of
// 100 with 3 replicas and a channel each, and has every partition take a
// first PUB on its leader, so an overload starts on a cluster whose leaders
// are all in place. It returns the topics, the partitions each node leads,
// and the first PUBs' bodies.
func spreadTopics(t *testing.T, c *testCluster) (names []string, byNode map[string][]part, acked map[string]bool) {
	t.Helper()
	const topics, perTopic = 3, 100
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
	acked = map[string]bool{}
	first := func(p part) string { return fmt.Sprintf("first-%s-%d", p.topic, p.p) }
	pending := all
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == 50 {
			t.Fatalf("%d partitions never took their first PUB", len(pending))
		}
		ok, _, _ := c.pubToLeaders(names, "", pending, first)
		pending = unacked(pending, ok, acked, first)
	}
	return names, c.leadersOf(names), acked
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

// runFlood runs the flood program with args and reads what it printed.
func runFlood(program string, args ...string) (flood.Result, error) {
	var r flood.Result
	cmd := exec.Command(program, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return r, json.Unmarshal(out, &r)
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
	return sumFamilies(scrapeMetrics(t, hostport), names)
}

// sumFamilies sums each named metric family's samples in a /metrics body.
func sumFamilies(body string, names []string) map[string]float64 {
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
