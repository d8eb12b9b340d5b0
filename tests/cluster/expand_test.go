package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// received is what one consumer got: every body, and the partitions they
// came from.
type received struct {
	mu     sync.Mutex
	bodies map[string]bool
	parts  map[int32]bool
}

func newReceived() *received {
	return &received{bodies: map[string]bool{}, parts: map[int32]bool{}}
}

func (r *received) add(id uint64, body string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies[body], r.parts[topic.PartitionOf(id)] = true, true
}

// handler records go-nsq's messages, whose IDs are 16 hex characters.
func (r *received) handler() nsq.HandlerFunc {
	return func(m *nsq.Message) error {
		id, err := strconv.ParseUint(string(m.ID[:]), 16, 64)
		if err != nil {
			return err
		}
		r.add(id, string(m.Body))
		return nil
	}
}

func (r *received) partitions() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.parts)
}

// missing is how many of acked were not received, and a few of them.
func (r *received) missing(acked map[string]bool) (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var some []string
	n := 0
	for b := range acked {
		if !r.bodies[b] {
			n++
			if len(some) < 10 {
				some = append(some, b)
			}
		}
	}
	return n, some
}

// acks is what the producers had acknowledged, per topic.
type acks struct {
	mu  sync.Mutex
	got map[string]map[string]bool
}

func (a *acks) add(topicName, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.got[topicName] == nil {
		a.got[topicName] = map[string]bool{}
	}
	a.got[topicName][body] = true
}

func (a *acks) count(topicName string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.got[topicName])
}

func (a *acks) of(topicName string) map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]bool, len(a.got[topicName]))
	for k := range a.got[topicName] {
		out[k] = true
	}
	return out
}

// publishEach publishes numbered bodies to every topic of topics, in turn,
// through one node until stop, recording what was acknowledged; a failed
// publish (a leader moving) is tried with the next body.
func publishEach(addr, prefix string, topics []string, a *acks, stop *atomic.Bool) {
	p := &freshProducer{addr: addr}
	defer p.close()
	for i := 0; !stop.Load(); i++ {
		for _, tp := range topics {
			body := fmt.Sprintf("%s-%s-%d", tp, prefix, i)
			if err := p.publish(tp, body); err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			a.add(tp, body)
		}
	}
}

// waitDelivered fails the test unless every acknowledged body reaches r.
func waitDelivered(t *testing.T, what string, r *received, acked map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		n, some := r.missing(acked)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d acknowledged messages never delivered, e.g. %v", what, n, len(acked), some)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// lookupPartitions is the partitions /lookup on a node names a leader of.
func lookupPartitions(t *testing.T, hostport, topicName string) []string {
	t.Helper()
	resp, err := http.Get("http://" + hostport + "/lookup?topic=" + topicName)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Partitions map[string]any `json:"partitions"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for p := range doc.Partitions {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// Under go-nsq producers on every node, a topic grows from 2 to 6
// partitions, and an ordered topic too under a numbering producer and a
// SUB_ORDERED consumer (one a partition, as youzan's, following its
// leader) on each partition. Consumers that subscribed before (go-nsq
// through /lookup, go-nsq connected to every node) receive the new
// partitions without reconnecting, the ordered ones of the new partitions
// start on their leaders, every acknowledged message is delivered to each
// (duplicates allowed), each ordered partition delivers in publish order
// without going back past a confirmed FIN, and /lookup, /stats and
// /metrics show the new partitions. One of the four nodes held none of the
// topic's partitions before, and opens the topic for the ones it is given.
func TestExpandUnderLoad(t *testing.T) {
	c := startCluster(t, 4)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=grow&partition_num=2&replicator=2", ""); code != 200 {
		t.Fatalf("create grow: %d %s", code, body)
	}
	for _, q := range []string{"topic=grow&channel=lk", "topic=grow&channel=direct"} {
		if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/channel/create?"+q, ""); code != 200 {
			t.Fatalf("channel %s: %d %s", q, code, body)
		}
	}
	// A channel starts where its topic's log ends on a node that opens it
	// after something was published; publishing waits for every node.
	testnode.Eventually(t, 10*time.Second, "every node to hold the channels", func() bool {
		return c.channelsOpen("grow", "lk", "direct")
	})
	var tcps []string
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		tcps = append(tcps, c.nodes[id].TCP)
	}

	viaLookup, direct := newReceived(), newReceived()
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 100
	cfg.LookupdPollInterval = time.Second
	lk, err := nsq.NewConsumer("grow", "lk", cfg)
	if err != nil {
		t.Fatal(err)
	}
	lk.SetLoggerLevel(nsq.LogLevelError)
	lk.AddHandler(viaLookup.handler())
	if err := lk.ConnectToNSQLookupds(c.lookups()); err != nil {
		t.Fatal(err)
	}
	defer func() { lk.Stop(); <-lk.StopChan }()
	dc, err := nsq.NewConsumer("grow", "direct", cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc.SetLoggerLevel(nsq.LogLevelError)
	dc.AddHandler(direct.handler())
	if err := dc.ConnectToNSQDs(tcps); err != nil {
		t.Fatal(err)
	}
	defer func() { dc.Stop(); <-dc.StopChan }()
	var stopPubs atomic.Bool
	var pubs sync.WaitGroup
	defer func() { stopPubs.Store(true); pubs.Wait() }()
	ordered := startOrdered(t, c, "seq", 2, 2)

	a := &acks{got: map[string]map[string]bool{}}
	for i, addr := range tcps {
		pubs.Go(func() { publishEach(addr, fmt.Sprint(i), []string{"grow"}, a, &stopPubs) })
	}
	testnode.Eventually(t, 30*time.Second, "publishing before the expand", func() bool { return a.count("grow") > 300 })

	if code, body := testnode.Post(t, c.nodes["n4"].HTTP, "/topic/partition/expand?topic=grow&partition_num=2", ""); code != 400 || !strings.Contains(body, "already has") {
		t.Fatalf("expanding to the count the topic has: %d %s", code, body)
	}
	if code, body := testnode.Post(t, c.nodes["n4"].HTTP, "/topic/partition/expand?topic=nothing&partition_num=2", ""); code != 404 {
		t.Fatalf("expanding a topic that does not exist: %d %s", code, body)
	}
	asked := time.Now()
	if code, body := testnode.Post(t, c.nodes["n3"].HTTP, "/topic/partition/expand?topic=grow&partition_num=6", ""); code != 200 {
		t.Fatalf("expand grow: %d %s", code, body)
	}
	answered := time.Since(asked)
	if code, body := testnode.Post(t, c.nodes["n4"].HTTP, "/topic/partition/expand?topic=seq&partition_num=6", ""); code != 200 {
		t.Fatalf("expand seq: %d %s", code, body)
	}
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/partition/expand?topic=grow&partition_num=4", ""); code != 400 || !strings.Contains(body, "the partition number can not be reduced") {
		t.Fatalf("shrinking: %d %s", code, body)
	}
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/partition/expand?topic=grow&partition_num=6", ""); code != 400 {
		t.Fatalf("the same count again: %d %s", code, body)
	}

	want := []string{"0", "1", "2", "3", "4", "5"}
	for _, n := range c.nodes {
		testnode.Eventually(t, 10*time.Second, "/lookup on "+n.HTTP+" to name six leaders", func() bool {
			return slices.Equal(lookupPartitions(t, n.HTTP, "grow"), want) && slices.Equal(lookupPartitions(t, n.HTTP, "seq"), want)
		})
	}
	listed := time.Since(asked)
	for p := int32(2); p < 6; p++ {
		ordered.add(p)
	}
	testnode.Eventually(t, 30*time.Second, "every consumer receiving from all six partitions", func() bool {
		return viaLookup.partitions() == 6 && direct.partitions() == 6
	})
	t.Logf("expand answered in %v; every node's /lookup listed six leaders %v after it was asked, every consumer received from all six %v after", answered, listed, time.Since(asked))
	lead5 := c.nodes[c.state("grow", 5).Leader]
	if v := testnode.Metric(t, lead5.HTTP, "partita_partition_is_leader", `partition="5",topic="grow"`); v != "1" {
		t.Fatalf("/metrics of partition 5's leader: partita_partition_is_leader %q", v)
	}
	if code, body := httpGet(t, lead5.HTTP, "/stats?format=json&topic=grow"); code != 200 || !strings.Contains(body, `"topic_partition":"5"`) {
		t.Fatalf("/stats of partition 5's leader: %d %s", code, body)
	}
	before := a.count("grow")
	testnode.Eventually(t, 30*time.Second, "publishing after the expand", func() bool { return a.count("grow") > before+300 })
	stopPubs.Store(true)
	pubs.Wait()

	if a.count("grow") < 600 {
		t.Fatalf("only %d publishes to grow acknowledged", a.count("grow"))
	}
	waitDelivered(t, "through /lookup", viaLookup, a.of("grow"))
	waitDelivered(t, "connected to every node", direct, a.of("grow"))
	ordered.delivered()
	for p := int32(0); p < 6; p++ {
		if st := c.state("grow", p); len(st.ISR) != 2 || st.EpochForWrite != 1 {
			t.Logf("grow/%d: ISR %v catch-up %v epoch %d", p, st.ISR, st.Catchup, st.EpochForWrite)
		}
	}
}

func httpGet(t *testing.T, hostport, pathAndQuery string) (int, string) {
	t.Helper()
	code, body, err := get(hostport, pathAndQuery)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// get is one GET of a node's HTTP API, bounded so that a paused or cut-off
// node fails it rather than hangs it.
func get(hostport, pathAndQuery string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + hostport + pathAndQuery)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// channelsOpen is whether every partition of the topic on every node has
// the channels.
func (c *testCluster) channelsOpen(topicName string, channels ...string) bool {
	type statsChannel struct {
		Name string `json:"channel_name"`
	}
	for _, n := range c.nodes {
		resp, err := http.Get("http://" + n.HTTP + "/stats?format=json&topic=" + topicName)
		if err != nil {
			return false
		}
		var doc struct {
			Topics []struct {
				Channels []statsChannel `json:"channels"`
			} `json:"topics"`
		}
		err = json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if err != nil {
			return false
		}
		for _, p := range doc.Topics {
			for _, want := range channels {
				if !slices.Contains(p.Channels, statsChannel{want}) {
					return false
				}
			}
		}
	}
	return true
}

// expandStored is the topic's count and its partitions' states as etcd
// holds them.
func (c *testCluster) expandStored(topicName string) (cluster.TopicMeta, []cluster.PartitionState) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, _, err := cluster.NewMetaStore(c.cli, "/partita/").Topic(ctx, topicName)
	if err != nil {
		c.t.Fatal(err)
	}
	states, err := c.assign.List(ctx, topicName)
	if err != nil {
		c.t.Fatal(err)
	}
	return m, states
}

// writable is whether every partition of a topic takes a publish through
// node via.
func writable(via, topicName string, partitions int) bool {
	for p := range partitions {
		resp, err := http.Post(fmt.Sprintf("http://%s/pub?topic=%s&partition=%d", via, topicName, p), "text/plain", strings.NewReader("probe"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return false
		}
	}
	return true
}

// A node killed with kill -9 while an expand runs leaves the topic whole:
// its count and its partitions' states agree, asking again finishes an
// expand that did not happen, every partition gets a live leader and
// takes writes, and every acknowledged message is delivered. Twice: the
// node asked dies as it is asked, then a node taking new partitions dies
// as they start.
func TestExpandSurvivesKill9(t *testing.T) {
	c := startCluster(t, 3)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=k&partition_num=2&replicator=3", ""); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	testnode.Post(t, c.nodes["n2"].HTTP, "/channel/create?topic=k&channel=ch", "")
	a := &acks{got: map[string]map[string]bool{}}
	var stop atomic.Bool
	var pubs sync.WaitGroup
	defer func() { stop.Store(true); pubs.Wait() }()
	for _, id := range []string{"n1", "n2", "n3"} {
		pubs.Go(func() { publishEach(c.nodes[id].TCP, id, []string{"k"}, a, &stop) })
	}
	testnode.Eventually(t, 30*time.Second, "publishing before the expand", func() bool { return a.count("k") > 200 })

	for _, round := range []struct {
		asked, victim string
		to            int
	}{{"n3", "n3", 4}, {"n1", "n2", 6}} {
		victim := c.nodes[round.victim]
		answered := make(chan int, 1)
		go func() {
			resp, err := http.Post(fmt.Sprintf("http://%s/topic/partition/expand?topic=k&partition_num=%d", c.nodes[round.asked].HTTP, round.to), "", nil)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		time.Sleep(5 * time.Millisecond) // a schedule: the kill lands while the expand runs
		victim.Kill(t)
		code := <-answered
		m, states := c.expandStored("k")
		t.Logf("round to %d: %s asked (answered %d), %s killed: the topic has %d partitions, %d states", round.to, round.asked, code, round.victim, m.Partitions, len(states))
		if int(m.Partitions) != len(states) {
			t.Fatalf("the topic's count %d and its %d partition states disagree", m.Partitions, len(states))
		}
		survivor := c.nodes["n1"]
		if round.victim == "n1" {
			survivor = c.nodes["n2"]
		}
		finished := int(m.Partitions) == round.to
		if finished {
			testnode.Eventually(t, 30*time.Second, fmt.Sprintf("all %d partitions taking writes without %s", round.to, round.victim), func() bool { return writable(survivor.HTTP, "k", round.to) })
		}
		c.restart(round.victim)
		if !finished {
			// Three replicas need the third node back.
			testnode.Eventually(t, 30*time.Second, "the expand asked again to succeed", func() bool {
				code, _ := testnode.Post(t, survivor.HTTP, fmt.Sprintf("/topic/partition/expand?topic=k&partition_num=%d", round.to), "")
				return code == 200
			})
		}
		testnode.Eventually(t, 30*time.Second, fmt.Sprintf("all %d partitions taking writes", round.to), func() bool { return writable(survivor.HTTP, "k", round.to) })
		testnode.Eventually(t, 60*time.Second, "every partition's ISR whole again", func() bool {
			_, states := c.expandStored("k")
			for _, st := range states {
				if len(st.ISR) != 3 {
					return false
				}
			}
			return len(states) == round.to
		})
		before := a.count("k")
		testnode.Eventually(t, 30*time.Second, "publishing after the round", func() bool { return a.count("k") > before+100 })
	}
	stop.Store(true)
	pubs.Wait()
	deliversAll(t, c.lookups(), "k", "ch", a.of("k"))
}

// Four nodes in three zones (two in a, one in b, one in c): every
// partition of a topic with three replicas has one in each zone, at
// creation and after an expand, and /nodes shows each node's zone.
func TestZonesSpreadReplicas(t *testing.T) {
	c := startCluster(t, 0)
	zones := map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "c"}
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		c.nodes[id] = testnode.StartProcess(t, t.TempDir(), "--etcd-endpoints", c.etcdAddr, "--node-id", id, "--zone", zones[id])
	}
	testnode.Eventually(t, 10*time.Second, "four nodes registered", func() bool {
		nodes, err := cluster.Nodes(context.Background(), c.cli, "/partita/")
		return err == nil && len(nodes) == 4
	})
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=z&partition_num=4&replicator=3", ""); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/topic/partition/expand?topic=z&partition_num=8", ""); code != 200 {
		t.Fatalf("expand: %d %s", code, body)
	}
	_, states := c.expandStored("z")
	if len(states) != 8 {
		t.Fatalf("%d partitions", len(states))
	}
	for _, st := range states {
		in := map[string]bool{}
		for _, n := range slices.Concat(st.ISR, st.Catchup) {
			in[zones[n]] = true
		}
		if len(in) != 3 {
			t.Fatalf("partition %d on %v: zones %v, want a, b and c", st.Partition, st.ISR, in)
		}
	}
	code, body := httpGet(t, c.nodes["n3"].HTTP, "/nodes")
	var doc struct {
		Producers []struct {
			TCPPort int    `json:"tcp_port"`
			Zone    string `json:"zone"`
		} `json:"producers"`
	}
	if err := json.Unmarshal([]byte(body), &doc); code != 200 || err != nil {
		t.Fatalf("/nodes: %d %s %v", code, body, err)
	}
	got := map[string]int{}
	for _, p := range doc.Producers {
		got[p.Zone]++
	}
	if got["a"] != 2 || got["b"] != 1 || got["c"] != 1 {
		t.Fatalf("/nodes zones %v, want a twice, b and c once", got)
	}
}

// maxFaultPartitions caps how far the fault suite's expand step grows the
// load topic.
const maxFaultPartitions = 8

// expandFault is the fault suite's expand step: the load topic gets one
// more partition, asked of the node the nemesis picked, under the suite's
// producers and consumers; topics follows, so the suite waits for the new
// partition's replicas too. Nothing is undone.
func (f *faultLab) expandFault(topics map[string]int) fault {
	return fault{name: "expand", inject: func(id string) {
		to := topics["load"] + 1
		if to > maxFaultPartitions {
			return
		}
		code, body := testnode.Post(f.t, f.nodes[id].HTTP, fmt.Sprintf("/topic/partition/expand?topic=load&partition_num=%d", to), "")
		if code != 200 {
			f.t.Logf("expanding load to %d through %s: %d %s", to, id, code, body)
			return
		}
		topics["load"] = to
	}, heal: func(string) {}}
}
