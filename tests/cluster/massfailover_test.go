package cluster

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// massFailoverPartitions is how many partitions the test spreads over three
// nodes; PARTITA_MASS_FAILOVER_PARTITIONS=10000 runs the full-size case.
func massFailoverPartitions(t *testing.T) int {
	if v := os.Getenv("PARTITA_MASS_FAILOVER_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("PARTITA_MASS_FAILOVER_PARTITIONS=%q: want a number of partitions, 3 or more", v)
		}
		return n
	}
	return 1000
}

// massFailoverFreezes reports whether the victim is frozen (SIGSTOP)
// rather than killed: PARTITA_MASS_FAILOVER_FREEZE=1. A frozen node keeps
// its ports open, so nothing but its lease lapsing tells the cluster, as
// with a hung host or a cut network.
func massFailoverFreezes() bool { return os.Getenv("PARTITA_MASS_FAILOVER_FREEZE") == "1" }

// leadersOf lists the partitions of topics by the node etcd names their
// leader.
func (c *testCluster) leadersOf(topics []string) map[string][]part {
	c.t.Helper()
	led := map[string][]part{}
	for _, name := range topics {
		states, err := c.assign.List(context.Background(), name)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, st := range states {
			led[st.Leader] = append(led[st.Leader], part{name, st.Partition})
		}
	}
	return led
}

// part names one partition of one topic.
type part struct {
	topic string
	p     int32
}

// logUndelivered logs, for a failed delivery check, every partition whose
// channel on a live node still holds messages, with its state in etcd.
func (c *testCluster) logUndelivered(t *testing.T, dead string, topics []string, channel string) {
	type stats struct {
		Topics []struct {
			Name      string `json:"topic_name"`
			Partition string `json:"topic_partition"`
			Leader    bool   `json:"is_leader"`
			Count     int64  `json:"message_count"`
			Channels  []struct {
				Name     string `json:"channel_name"`
				Depth    int64  `json:"depth"`
				InFlight int64  `json:"in_flight_count"`
				Deferred int64  `json:"deferred_count"`
				Clients  []any  `json:"clients"`
			} `json:"channels"`
		} `json:"topics"`
	}
	for id, n := range c.nodes {
		if id == dead {
			continue
		}
		logged := 0
		for _, name := range topics {
			var st stats
			getJSONInto(t, n.HTTP, "/stats?format=json&topic="+name, &st)
			for _, tp := range st.Topics {
				for _, ch := range tp.Channels {
					if ch.Name != channel || ch.Depth+ch.InFlight+ch.Deferred == 0 || logged >= 20 {
						continue
					}
					logged++
					p, _ := strconv.Atoi(tp.Partition)
					state, _, _ := c.assign.Get(context.Background(), name, int32(p))
					t.Logf("undelivered on %s: %s/%s leader here %v, %d messages, channel depth %d in flight %d deferred %d clients %d; etcd: %+v",
						id, name, tp.Partition, tp.Leader, tp.Count, ch.Depth, ch.InFlight, ch.Deferred, len(ch.Clients), state)
				}
			}
		}
	}
	// The live nodes' warnings, read once they stopped writing them.
	for id, n := range c.nodes {
		if id == dead {
			continue
		}
		n.Kill(t)
		warned := logLines(t, id, n, 20, func(line string) bool {
			return strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")
		})
		t.Logf("%s: %d warnings and errors in all", id, warned)
	}
}

// logLines logs the lines of node id's log that match, at most the first
// most of them (0: all), and returns how many matched.
func logLines(t *testing.T, id string, n *testnode.Process, most int, match func(string) bool) int {
	matched := 0
	for _, line := range strings.Split(n.Log.String(), "\n") {
		if match(line) {
			if matched++; most == 0 || matched <= most {
				t.Logf("%s: %s", id, line[:min(len(line), 300)])
			}
		}
	}
	return matched
}

// unacked records in acked the body of every partition of pending that
// took its PUB (ok) and returns the others.
func unacked(pending []part, ok map[part]bool, acked map[string]bool, body func(part) string) []part {
	var left []part
	for _, p := range pending {
		if ok[p] {
			acked[body(p)] = true
		} else {
			left = append(left, p)
		}
	}
	return left
}

// pipelinedPub publishes one body to each listed partition over one NSQ
// connection, all commands first and then their answers, which come back
// in order. It returns the partitions that answered OK, and how many
// answers were each error code.
func pipelinedPub(addr string, partitions []part, body func(part) string) (map[part]bool, map[string]int, error) {
	refused := map[string]int{}
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, refused, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(c)
	w.WriteString(protocol.MagicV2)
	for _, p := range partitions {
		b := body(p)
		fmt.Fprintf(w, "PUB %s %d\n", p.topic, p.p)
		binary.Write(w, binary.BigEndian, uint32(len(b)))
		w.WriteString(b)
	}
	if err := w.Flush(); err != nil {
		return nil, refused, err
	}
	ok := map[part]bool{}
	r := bufio.NewReader(c)
	for _, p := range partitions {
		typ, data, err := protocol.ReadFrame(r)
		for err == nil && typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			typ, data, err = protocol.ReadFrame(r)
		}
		if err != nil {
			return ok, refused, err // a fatal error closed the connection: the rest go again
		}
		switch {
		case typ == protocol.FrameTypeResponse && string(data) == "OK":
			ok[p] = true
		case typ == protocol.FrameTypeError:
			code, _, _ := strings.Cut(string(data), " ")
			refused[code]++
		}
	}
	return ok, refused, nil
}

// profileSurvivors starts a 5 s CPU profile of every node but victim,
// each written to dir as <node>.pprof, and of the test's process as
// test.pprof; the returned func waits for them. With
// PARTITA_MASS_FAILOVER_TRACE=1 each node also writes an execution
// trace, <node>.trace, for go tool trace: what waited, and on what. Taken
// beside the CPU profile, the trace carries its samples with their times,
// so the CPU of any moment of the failover can be read from it.
func (c *testCluster) profileSurvivors(t *testing.T, dir, victim string) (wait func()) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]string{"profile": ".pprof"}
	if os.Getenv("PARTITA_MASS_FAILOVER_TRACE") == "1" {
		kinds["trace"] = ".trace"
	}
	var wg sync.WaitGroup
	for id, n := range c.nodes {
		if id == victim {
			continue
		}
		for kind, ext := range kinds {
			wg.Go(func() {
				if err := fetchProfile(n.HTTP, kind, filepath.Join(dir, id+ext)); err != nil {
					t.Logf("profiling %s: %v", id, err)
				}
			})
		}
	}
	// And this process's, which runs the consumers and the PUBs.
	f, err := os.Create(filepath.Join(dir, "test.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	var stop *time.Timer
	if err := pprof.StartCPUProfile(f); err != nil {
		// As under go test -cpuprofile: that profile is not this one to stop.
		t.Logf("profiling the test: %v", err)
	} else {
		stop = time.AfterFunc(5*time.Second, pprof.StopCPUProfile)
	}
	return func() {
		wg.Wait()
		if stop != nil && stop.Stop() {
			pprof.StopCPUProfile()
		}
		f.Close()
		t.Logf("CPU profiles of the survivors and of the test's process are in %s", dir)
	}
}

// fetchProfile writes 5 s of a node's /debug/pprof/<kind> to path.
func fetchProfile(hostport, kind, path string) error {
	resp, err := http.Get("http://" + hostport + "/debug/pprof/" + kind + "?seconds=5")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, b)
	}
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// keepLogs writes each node's whole log into dir, once the nodes have
// stopped writing them.
func (c *testCluster) keepLogs(t *testing.T, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping the logs: %v", err)
		return
	}
	for id, n := range c.nodes {
		n.Kill(t)
		if err := os.WriteFile(filepath.Join(dir, id+".log"), n.Log.Bytes(), 0o644); err != nil {
			t.Logf("keeping %s's log: %v", id, err)
		}
	}
	t.Logf("every node's log is in %s", dir)
}

// A node leading a third of many partitions is killed with SIGKILL: every
// partition it led takes a PUB again within 3 s with the default 2 s lease,
// on the node etcd names its leader, and every acknowledged message is
// still there and delivered to consumers attached before the kill.
// Frozen instead (PARTITA_MASS_FAILOVER_FREEZE=1), within 3.5 s: its lease
// must lapse first. PARTITA_MASS_FAILOVER_LOGDIR keeps every node's log
// there, at PARTITA_MASS_FAILOVER_LOG_LEVEL (warn unless set);
// PARTITA_MASS_FAILOVER_PROFILE=dir keeps a CPU profile of each survivor
// and of the test's process over the 5 s from the fault.
func TestKilledNodesPartitionsAllWritableAgain(t *testing.T) {
	total := massFailoverPartitions(t)
	level := cmp.Or(os.Getenv("PARTITA_MASS_FAILOVER_LOG_LEVEL"), "warn")
	// etcd runs in a process of its own, as it does beside a deployment:
	// in this one the consumers of every partition would hold its lease
	// renewals back while they catch up.
	endpoint, cli := testnode.StartEtcdProcess(t)
	c := startNodes(t, endpoint, cli, 3, "--log-level", level)
	if dir := os.Getenv("PARTITA_MASS_FAILOVER_LOGDIR"); dir != "" {
		t.Cleanup(func() { c.keepLogs(t, dir) })
	}
	// A topic has at most 1,024 partitions: the message ID holds its
	// partition in 10 bits.
	const perTopic = 1000
	var all []part
	var topics []string
	for i := 0; i*perTopic < total; i++ {
		name, n := fmt.Sprintf("wide%d", i), min(perTopic, total-i*perTopic)
		if code, body := testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=%s&partition_num=%d&replicator=3", name, n), ""); code != 200 {
			t.Fatalf("creating %d partitions of %s: %d %s", n, name, code, body)
		}
		topics = append(topics, name)
		for p := range n {
			all = append(all, part{name, int32(p)})
		}
	}
	acked := map[string]bool{}
	before := func(p part) string { return fmt.Sprintf("before-%s-%d", p.topic, p.p) }
	// Thousands of partitions take a while to start leading, and the
	// node's admission refuses what it cannot answer yet: the first PUBs
	// go again until every partition took one, for a minute at most.
	pending := all
	for setup := time.Now(); len(pending) > 0; {
		if time.Since(setup) > time.Minute {
			t.Fatalf("%d partitions never took their first PUB", len(pending))
		}
		ok, _, _ := pipelinedPub(c.nodes["n1"].TCP, pending, before)
		pending = unacked(pending, ok, acked, before)
	}
	// Wall-clock times of the phases, to read beside the nodes' logs.
	t.Logf("%s: every partition took its first PUB", time.Now().UTC().Format(time.TimeOnly+".000"))

	led := c.leadersOf(topics)
	victim := "n1"
	for id, ps := range led {
		if len(ps) > len(led[victim]) {
			victim = id
		}
	}
	// Killed, the node's peers evict it at once; frozen, its lease lapses
	// after up to its 2 s TTL and etcd's half-second expiry sweep.
	how, within := "killing", 3*time.Second
	if massFailoverFreezes() {
		how, within = "freezing", 3500*time.Millisecond
	}
	t.Logf("%s %s, leader of %d of %d partitions", how, victim, len(led[victim]), total)

	// Consumers are attached before the fault, one a topic, connected to
	// every node the victim included (through the survivors' lookups: a
	// frozen node's would stall their polls), and have read what was
	// published so far: each must follow its partitions to their new
	// leaders, and a mass failover must not wait on thousands of
	// subscriptions one by one.
	var lookups []string
	for id, n := range c.nodes {
		if id != victim {
			lookups = append(lookups, n.HTTP)
		}
	}
	consumers := consumeAll(t, lookups, topics, "check", 200)
	defer consumers.stop()
	consumers.await(t, maps.Clone(acked), 60*time.Second)
	t.Logf("%s: the consumers read every message", time.Now().UTC().Format(time.TimeOnly+".000"))

	after := func(p part) string { return fmt.Sprintf("after-%s-%d", p.topic, p.p) }
	lostBefore := map[string]float64{}
	for id, n := range c.nodes {
		if id != victim {
			lostBefore[id] = scrapeSums(t, n.HTTP, []string{"partita_node_registrations_lost_total"})["partita_node_registrations_lost_total"]
		}
	}
	// Not the failover's, so not failed on, but what the setup's first
	// writes and reads cost: a cluster shaken by it fails over slower.
	t.Logf("registrations lost before the %s, by survivor: %v", how, lostBefore)
	for id, n := range c.nodes {
		if lostBefore[id] == 0 {
			continue
		}
		logLines(t, id, n, 0, func(line string) bool { return strings.Contains(line, "registration lost") })
	}
	lapsed := c.registrationGone(victim)
	leaders := c.watchLeaders()
	if dir := os.Getenv("PARTITA_MASS_FAILOVER_PROFILE"); dir != "" {
		defer c.profileSurvivors(t, dir, victim)()
	}
	killed := time.Now()
	t.Logf("%s: %s %s", killed.UTC().Format(time.TimeOnly+".000"), how, victim)
	if massFailoverFreezes() {
		if err := c.nodes[victim].Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	} else {
		c.nodes[victim].Kill(t)
	}
	pending = led[victim]
	var last, elected time.Duration
	// Each round of PUBs, for the reader of a slow run: when it began and
	// ended, and what the partitions not yet writable answered. A round
	// PUBs every partition whose new leader the watch delivered; with none,
	// it waits for the watch's next delivery.
	var rounds []string
	for len(pending) > 0 {
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("%d partitions still not writable 60 s after the kill", len(pending))
		}
		leader, changed := leaders.snapshot()
		if !slices.ContainsFunc(pending, func(p part) bool { l := leader[p]; return l != victim && c.nodes[l] != nil }) {
			select {
			case <-changed:
			case <-time.After(time.Second): // to look at the time limit again
			}
			continue
		}
		began := time.Since(killed)
		ok, refused, orphans := c.pubTo(leader, victim, pending, after)
		if orphans == 0 && elected == 0 {
			elected = time.Since(killed)
		}
		left := unacked(pending, ok, acked, after)
		if len(left) < len(pending) {
			last = time.Since(killed)
		}
		rounds = append(rounds, fmt.Sprintf("%v–%v: %d of %d took it, %d without a new leader, refused %v",
			began.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond), len(pending)-len(left), len(pending), orphans, refused))
		if len(left) == len(pending) {
			// Refused everywhere: back off as a client would, rather than
			// PUB again at once on the two cores the failover needs.
			select {
			case <-changed:
			case <-time.After(20 * time.Millisecond):
			}
		}
		pending = left
	}
	t.Logf("rounds of PUBs after the kill:\n%s", strings.Join(rounds, "\n"))
	// And the controller's rounds of elections, with how long it waited
	// for the candidates' answers and for etcd.
	for id, n := range c.nodes {
		if id != victim {
			logLines(t, id, n, 0, func(line string) bool {
				return strings.Contains(line, "failover round") || strings.Contains(line, "elected controller")
			})
		}
	}
	// Where the time went: the lease lapsing is etcd's (the lease's TTL
	// and its once-every-500 ms expiry check); the rest is Partita's.
	select {
	case at := <-lapsed:
		t.Logf("after the kill: registration gone %v, every partition led again by %v as the test saw it, every partition took a PUB again %v",
			at.Sub(killed).Round(time.Millisecond), elected.Round(time.Millisecond), last.Round(time.Millisecond))
	default:
		t.Errorf("every partition took a PUB again %v after the kill, yet the killed node's registration is still in etcd", last)
	}
	if !raceEnabled && last > within {
		t.Errorf("the last partition took a PUB %v after the kill, want within %v", last, within)
	}

	t.Cleanup(func() {
		if t.Failed() {
			c.logUndelivered(t, victim, topics, "check")
		}
	})
	consumers.await(t, acked, 60*time.Second)
	// No survivor lost its registration, through the failover and the
	// consumers that followed it.
	for id, lost := range lostBefore {
		n := c.nodes[id]
		now := scrapeSums(t, n.HTTP, []string{"partita_node_registrations_lost_total"})["partita_node_registrations_lost_total"]
		gap := longestRenewalGap(t, n.HTTP)
		t.Logf("%s: registrations lost %v, longest lease renewal gap %s, longest wait of a runnable goroutine %s",
			id, now-lost, gap, topBucket(t, n.HTTP, "go_sched_latencies_seconds"))
		if now > lost && !raceEnabled {
			t.Errorf("%s lost its registration %v times after the kill (longest renewal gap %s)", id, now-lost, gap)
		}
	}
}

// longestRenewalGap is the bucket of partita_node_lease_keepalive_gap_seconds
// holding a node's longest time between two acknowledged renewals.
func longestRenewalGap(t *testing.T, hostport string) string {
	return topBucket(t, hostport, "partita_node_lease_keepalive_gap_seconds")
}

// topBucket is the lowest bucket of a node's histogram name that holds
// every observation: where its largest one fell.
func topBucket(t *testing.T, hostport, name string) string {
	t.Helper()
	body := scrapeMetrics(t, hostport)
	type bucket struct {
		le    string
		count float64
	}
	var buckets []bucket
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"_bucket{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, value, _ := strings.Cut(rest, `"} `)
		v, _ := strconv.ParseFloat(value, 64)
		buckets = append(buckets, bucket{le, v})
	}
	if len(buckets) == 0 {
		return "unknown"
	}
	total := buckets[len(buckets)-1].count
	for _, b := range buckets {
		if b.count == total {
			return "≤ " + b.le + " s"
		}
	}
	return "unknown"
}

// registrationGone reports when node id's key leaves etcd.
func (c *testCluster) registrationGone(id string) <-chan time.Time {
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	nodes := cluster.WatchNodes(ctx, c.cli, "/partita/")
	for ns := range nodes {
		if slices.ContainsFunc(ns, func(n cluster.NodeInfo) bool { return n.ID == id }) {
			break
		}
	}
	gone := make(chan time.Time, 1)
	go func() {
		for ns := range nodes {
			if !slices.ContainsFunc(ns, func(n cluster.NodeInfo) bool { return n.ID == id }) {
				gone <- time.Now()
				return
			}
		}
	}()
	return gone
}

// pubToLeaders publishes to each partition on the node etcd names its
// leader now, as a client that looks the leaders up does, every node's
// partitions at once on a connection of their own; partitions still led
// by the dead node wait for the next round, and are counted as orphans.
func (c *testCluster) pubToLeaders(topics []string, dead string, partitions []part, body func(part) string) (ok map[part]bool, refused map[string]int, orphans int) {
	c.t.Helper()
	leader := map[part]string{}
	for _, name := range topics {
		states, err := c.assign.List(context.Background(), name)
		if err != nil {
			c.t.Fatal(err)
		}
		for _, st := range states {
			leader[part{name, st.Partition}] = st.Leader
		}
	}
	return c.pubTo(leader, dead, partitions, body)
}

// pubTo PUBs to each partition on the node leader names, pipelined over
// one connection per node, skipping the partitions without a live leader
// there (orphans).
func (c *testCluster) pubTo(leader map[part]string, dead string, partitions []part, body func(part) string) (ok map[part]bool, refused map[string]int, orphans int) {
	byNode := map[string][]part{}
	for _, p := range partitions {
		if n := leader[p]; n != dead && c.nodes[n] != nil {
			byNode[n] = append(byNode[n], p)
		} else {
			orphans++
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok, refused = map[part]bool{}, map[string]int{}
	for n, ps := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, codes, _ := pipelinedPub(c.nodes[n].TCP, ps, body)
			mu.Lock()
			defer mu.Unlock()
			for p := range got {
				ok[p] = true
			}
			for code, k := range codes {
				refused[n+" "+code] += k
			}
		}()
	}
	wg.Wait()
	return ok, refused, orphans
}

// leaderWatch is every partition's leader as etcd's watch delivers it: a
// client that learns leaders as they are stored, rather than listing ten
// thousand states from etcd again and again while it waits for them.
type leaderWatch struct {
	mu      sync.Mutex
	leader  map[part]string
	changed chan struct{} // closed and replaced at each delivery
}

func (c *testCluster) watchLeaders() *leaderWatch {
	ctx, cancel := context.WithCancel(context.Background())
	c.t.Cleanup(cancel)
	w := &leaderWatch{leader: map[part]string{}, changed: make(chan struct{})}
	batches := c.assign.Watch(ctx, "")
	w.apply(<-batches) // the listed states: the watch is current from here
	go func() {
		for states := range batches {
			w.apply(states)
		}
	}()
	return w
}

func (w *leaderWatch) apply(states []cluster.PartitionState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range states {
		w.leader[part{st.Topic, st.Partition}] = st.Leader
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// snapshot is the leaders delivered so far, and a channel closed at the
// next delivery.
func (w *leaderWatch) snapshot() (map[part]string, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.leader), w.changed
}
