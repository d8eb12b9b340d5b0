package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// traffic is go-nsq producers publishing numbered messages to a topic
// through every node, and a consumer reading it through every node's
// lookup, while a test moves replicas underneath: every acknowledged
// message must be delivered (duplicates are not judged).
type traffic struct {
	t         *testing.T
	mu        sync.Mutex
	acked     map[string]bool
	got       map[string]bool
	stop      atomic.Bool
	producers sync.WaitGroup
	consumer  *nsq.Consumer
}

// messageKey names a message by what precedes its first space, so large
// bodies are not kept whole.
func messageKey(body []byte) string {
	if i := bytes.IndexByte(body, ' '); i >= 0 {
		return string(body[:i])
	}
	return string(body)
}

func startTraffic(t *testing.T, c *testCluster, topic, channel string) *traffic {
	tr := &traffic{t: t, acked: map[string]bool{}, got: map[string]bool{}}
	for id, n := range c.nodes {
		tr.producers.Add(1)
		go tr.publish(id, n.TCP, topic)
	}
	cons := lookupConsumer(t, c.lookups(), topic, channel, func(m *nsq.Message) {
		tr.mu.Lock()
		tr.got[messageKey(m.Body)] = true
		tr.mu.Unlock()
	})
	tr.consumer = cons
	t.Cleanup(func() { tr.stopPublishing(); cons.Stop(); <-cons.StopChan })
	testnode.Eventually(t, 30*time.Second, "publishing to start", func() bool { return tr.count() > 200 })
	return tr
}

func (tr *traffic) publish(id, addr, topic string) {
	defer tr.producers.Done()
	p := &freshProducer{addr: addr}
	defer p.close()
	for i := 0; !tr.stop.Load(); i++ {
		b := fmt.Sprintf("%s-%d", id, i)
		if err := p.publish(topic, b); err != nil {
			// A killed node, or a leader handing over: not a wait for
			// anything, only no busy loop against a closed port.
			time.Sleep(20 * time.Millisecond)
			continue
		}
		tr.ack(b)
	}
}

func (tr *traffic) ack(key string) {
	tr.mu.Lock()
	tr.acked[key] = true
	tr.mu.Unlock()
}

func (tr *traffic) count() int { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.acked) }

func (tr *traffic) stopPublishing() { tr.stop.Store(true); tr.producers.Wait() }

// delivered stops the producers and waits until every acknowledged message
// was consumed.
func (tr *traffic) delivered() {
	tr.t.Helper()
	tr.stopPublishing()
	missing := func() []string {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		var out []string
		for k := range tr.acked {
			if !tr.got[k] {
				out = append(out, k)
			}
		}
		return out
	}
	deadline := time.Now().Add(90 * time.Second)
	for m := missing(); len(m) > 0; m = missing() {
		if time.Now().After(deadline) {
			slices.Sort(m)
			tr.t.Fatalf("%d of %d acknowledged messages never delivered, e.g. %v", len(m), tr.count(), m[:min(10, len(m))])
		}
		<-time.After(50 * time.Millisecond)
	}
	tr.t.Logf("%d acknowledged messages, every one delivered", tr.count())
}

// prefill publishes about mb megabytes in MPUBs of 1 MiB through addr, each
// message acknowledged into tr.
func (tr *traffic) prefill(addr, topic string, mb int) {
	tr.t.Helper()
	pad := strings.Repeat("x", 64<<10)
	for r := range mb {
		var body strings.Builder
		keys := make([]string, 16)
		for i := range keys {
			keys[i] = fmt.Sprintf("pre-%d-%d", r, i)
			if i > 0 {
				body.WriteByte('\n')
			}
			body.WriteString(keys[i] + " " + pad)
		}
		if code, resp := testnode.Post(tr.t, addr, "/mpub?topic="+topic, body.String()); code != 200 {
			tr.t.Fatalf("prefill: %d %s", code, resp)
		}
		for _, k := range keys {
			tr.ack(k)
		}
	}
}

// createWithChannel makes a topic and its channel ch through node 1.
func (c *testCluster) createWithChannel(topic string, partitions, replicas int) {
	c.t.Helper()
	q := fmt.Sprintf("/topic/create?topic=%s&partition_num=%d&replicator=%d", topic, partitions, replicas)
	if code, body := testnode.Post(c.t, c.nodes["n1"].HTTP, q, ""); code != 200 {
		c.t.Fatalf("create %s: %d %s", topic, code, body)
	}
	testnode.Post(c.t, c.nodes["n1"].HTTP, "/channel/create?topic="+topic+"&channel=ch", "")
}

// partitionDir is where node keeps a partition's files.
func (c *testCluster) partitionDir(node, topic string, p int32) string {
	return filepath.Join(c.nodes[node].DataPath, "topics", topic, fmt.Sprint(p))
}

// holders are the nodes a state places the partition on.
func holders(st cluster.PartitionState) []string { return slices.Concat(st.ISR, st.Catchup) }

// spareFor is a node of c not holding st's partition.
func (c *testCluster) spareFor(st cluster.PartitionState) string {
	for _, id := range slices.Sorted(maps.Keys(c.nodes)) {
		if !slices.Contains(holders(st), id) {
			return id
		}
	}
	c.t.Fatalf("no node without %s/%d", st.Topic, st.Partition)
	return ""
}

// move asks node via for youzan's partition move and checks it was taken.
func (c *testCluster) move(via, topic string, p int32, from, to string) {
	c.t.Helper()
	q := fmt.Sprintf("/topic/partition/move?topic=%s&partition=%d&move_from=%s&move_to=%s", topic, p, from, to)
	if code, body := testnode.Post(c.t, c.nodes[via].HTTP, q, ""); code != 200 {
		c.t.Fatalf("move %s/%d %s → %s: %d %s", topic, p, from, to, code, body)
	}
}

// moved waits until the partition's move is over with the ISR full (each
// of want in sync, nothing catching up) and the nodes of gone dropped
// their copy.
func (c *testCluster) moved(topic string, p int32, want []string, gone ...string) cluster.PartitionState {
	c.t.Helper()
	var st cluster.PartitionState
	for deadline := time.Now().Add(90 * time.Second); ; <-time.After(50 * time.Millisecond) {
		st = c.state(topic, p)
		isr := slices.Sorted(slices.Values(st.ISR))
		if !st.Move.Active() && len(st.Catchup) == 0 && slices.Equal(isr, slices.Sorted(slices.Values(want))) && int(st.Replicas) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s/%d not on %v in sync with the move over after 90 s: leader %s ISR %v catch-up %v replicas %d move %+v",
				topic, p, want, st.Leader, st.ISR, st.Catchup, st.Replicas, st.Move)
		}
	}
	for _, n := range gone {
		if _, ok := c.nodes[n]; !ok {
			continue
		}
		// Renamed out of its place, then deleted in the background.
		testnode.Eventually(c.t, 30*time.Second, n+" to drop its copy", func() bool {
			_, err := os.Stat(c.partitionDir(n, topic, p))
			left, _ := filepath.Glob(filepath.Join(filepath.Dir(c.partitionDir(n, topic, p)), ".discarded-*"))
			return os.IsNotExist(err) && len(left) == 0
		})
	}
	return st
}

// sameCommitLogs waits until every ISR member's commit log of the partition
// holds what the leader's held when the wait began, and all of them agree
// as far as each goes: publishes go on meanwhile, so the logs are compared
// over their common length, not whole.
func (c *testCluster) sameCommitLogs(st cluster.PartitionState) {
	c.t.Helper()
	read := func(n string) []byte {
		b, _ := os.ReadFile(filepath.Join(c.partitionDir(n, st.Topic, st.Partition), "commit.log"))
		return b
	}
	base := len(read(st.Leader))
	testnode.Eventually(c.t, 30*time.Second, "every ISR member's commit log to hold and agree with the leader's", func() bool {
		want := read(st.Leader)
		if len(want) == 0 || len(want) < base {
			return false
		}
		for _, n := range st.ISR {
			got := read(n)
			common := min(len(got), len(want))
			if len(got) < base || !bytes.Equal(got[:common], want[:common]) {
				return false
			}
		}
		return true
	})
}

func without(list []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(n string) bool { return slices.Contains(drop, n) })
}

// A follower's replica of a partition holding 100 MB moves to the fourth
// node under go-nsq publishing and consuming, then the leader's replica
// moves too (leadership handed to a replica in sync first), and so do an
// ordered partition's under its numbering producer and SUB_ORDERED
// consumer: the new replicas hold the leader's commit log, the old ones
// are deleted, every acknowledged message is delivered, and the ordered
// one in publish order without going back past a confirmed FIN.
func TestMoveReplicaWithDataUnderLoad(t *testing.T) {
	c := startCluster(t, 4)
	st := c.createTopic("mv", 3)
	testnode.Post(t, c.nodes["n1"].HTTP, "/channel/create?topic=mv&channel=ch", "")
	tr := startTraffic(t, c, "mv", "ch")
	ord := startOrdered(t, c, "mvo", 1, 3)
	ost := c.state("mvo", 0)
	mb := 100
	if raceEnabled {
		mb = 30 // the race detector slows every byte tenfold
	}
	start := time.Now()
	tr.prefill(c.nodes[st.Leader].HTTP, "mv", mb)
	t.Logf("%d MB published in %v", mb, time.Since(start).Round(time.Millisecond))

	from, to := c.followers(st)[0], c.spareFor(st)
	ofrom, oto := c.followers(ost)[0], c.spareFor(ost)
	start = time.Now()
	c.move("n1", "mv", 0, from, to)
	c.move("n1", "mvo", 0, ofrom, oto)
	st = c.moved("mv", 0, append(without(st.ISR, from), to), from)
	t.Logf("moved a follower's replica %s → %s in %v", from, to, time.Since(start).Round(time.Millisecond))
	ost = c.moved("mvo", 0, append(without(ost.ISR, ofrom), oto), ofrom)
	c.sameCommitLogs(st)

	leader, oleader := st.Leader, ost.Leader
	start = time.Now()
	c.move("n2", "mv", 0, leader, from)
	c.move("n2", "mvo", 0, oleader, ofrom)
	st = c.moved("mv", 0, append(without(st.ISR, leader), from), leader)
	t.Logf("moved the leader's replica %s → %s in %v; %s leads", leader, from, time.Since(start).Round(time.Millisecond), st.Leader)
	if st.Leader == leader {
		t.Fatalf("%s still leads after its replica moved: %+v", leader, st)
	}
	if ost = c.moved("mvo", 0, append(without(ost.ISR, oleader), ofrom), oleader); ost.Leader == oleader {
		t.Fatalf("%s still leads the ordered partition after its replica moved: %+v", oleader, ost)
	}
	c.sameCommitLogs(st)
	tr.delivered()
	ord.delivered()
}

// replicas asks node via for the topic's replica count.
func (c *testCluster) replicas(via, topic string, n int) {
	c.t.Helper()
	if code, body := testnode.Post(c.t, c.nodes[via].HTTP, fmt.Sprintf("/topic/meta/update?topic=%s&replicator=%d", topic, n), ""); code != 200 {
		c.t.Fatalf("%s to %d replicas: %d %s", topic, n, code, body)
	}
}

// A topic of one replica per partition goes to three under load, and back
// to one, and so does an ordered topic under its numbering producer and
// SUB_ORDERED consumer: every partition ends with its count in sync, the
// removed copies deleted, every acknowledged message delivered, and the
// ordered ones in publish order without going back past a confirmed FIN.
func TestReplicaCountOneToThreeAndBack(t *testing.T) {
	c := startCluster(t, 3)
	c.createWithChannel("rc", 2, 1)
	tr := startTraffic(t, c, "rc", "ch")
	ord := startOrdered(t, c, "rco", 1, 1)
	tr.prefill(c.nodes[c.state("rc", 0).Leader].HTTP, "rc", 5)

	c.replicas("n2", "rc", 3)
	c.replicas("n2", "rco", 3)
	for p := range int32(2) {
		st := c.moved("rc", p, []string{"n1", "n2", "n3"})
		c.sameCommitLogs(st)
	}
	c.moved("rco", 0, []string{"n1", "n2", "n3"})
	before := tr.count()
	testnode.Eventually(t, 30*time.Second, "publishing on three replicas", func() bool { return tr.count() > before+200 })

	c.replicas("n3", "rc", 1)
	c.replicas("n3", "rco", 1)
	for _, ref := range []cluster.PartitionRef{{Topic: "rc", Partition: 0}, {Topic: "rc", Partition: 1}, {Topic: "rco", Partition: 0}} {
		leader := c.state(ref.Topic, ref.Partition).Leader
		c.moved(ref.Topic, ref.Partition, []string{leader}, without([]string{"n1", "n2", "n3"}, leader)...)
	}
	before = tr.count()
	testnode.Eventually(t, 30*time.Second, "publishing on one replica", func() bool { return tr.count() > before+200 })
	tr.delivered()
	ord.delivered()
}

// kill -9 in the middle of a move, while the target catches up (the rate
// limit keeps it catching up for seconds): a killed target rolls the move
// back, the source keeping its replica; a killed source does not stop the
// move, which ends with the target in sync and the source gone; a killed
// leader (restarted at once) leaves the move to the leader elected, which
// finishes it. Each time the ISR ends full with the leader's commit log
// and every acknowledged message is delivered. An ordered partition, under
// its numbering producer and SUB_ORDERED consumer, moves a follower's
// replica as each kill lands and ends with its three replicas in sync, its
// acknowledged messages delivered in publish order without going back
// past a confirmed FIN.
func TestMoveInterruptedByKill(t *testing.T) {
	c := startCluster(t, 4, "--catchup-rate-limit", "1000000", "--replica-repair-after", "1h")
	st := c.createTopic("mk", 3)
	testnode.Post(t, c.nodes["n1"].HTTP, "/channel/create?topic=mk&channel=ch", "")
	tr := startTraffic(t, c, "mk", "ch")
	ord := startOrdered(t, c, "mko", 1, 3)
	moveOrdered := func(via string) {
		ost := c.state("mko", 0)
		c.move(via, "mko", 0, c.followers(ost)[0], c.spareFor(ost))
	}
	tr.prefill(c.nodes[st.Leader].HTTP, "mk", 8) // 8 s of catch-up at 1 MB/s

	from, to := c.followers(st)[0], c.spareFor(st)
	catchingUp := func() bool { return slices.Contains(c.state("mk", 0).Catchup, to) }
	c.move("n1", "mk", 0, from, to)
	moveOrdered("n1")
	testnode.Eventually(t, 30*time.Second, to+" catching up", catchingUp)
	c.nodes[to].Kill(t)
	st = c.moved("mk", 0, st.ISR)
	t.Logf("target %s killed mid-move: rolled back to %v", to, st.ISR)
	c.restart(to)
	testnode.Eventually(t, 30*time.Second, to+" to drop the copy it started", func() bool {
		_, err := os.Stat(c.partitionDir(to, "mk", 0))
		return os.IsNotExist(err)
	})
	c.settled("mko", 3)

	c.move("n1", "mk", 0, from, to)
	moveOrdered("n1")
	testnode.Eventually(t, 30*time.Second, to+" catching up again", catchingUp)
	c.nodes[from].Kill(t)
	st = c.moved("mk", 0, append(without(st.ISR, from), to))
	t.Logf("source %s killed mid-move: the move finished, ISR %v", from, st.ISR)
	c.sameCommitLogs(st)

	c.restart(from)
	testnode.Eventually(t, 30*time.Second, from+" to drop its copy", func() bool {
		_, err := os.Stat(c.partitionDir(from, "mk", 0))
		return os.IsNotExist(err)
	})
	c.settled("mko", 3)
	leader, src := st.Leader, c.followers(st)[0]
	c.move(src, "mk", 0, src, from)
	moveOrdered(src)
	testnode.Eventually(t, 30*time.Second, from+" catching up", func() bool { return slices.Contains(c.state("mk", 0).Catchup, from) })
	c.nodes[leader].Kill(t)
	c.restart(leader)
	st = c.moved("mk", 0, append(without(st.ISR, src), from), src)
	t.Logf("leader %s killed mid-move: the move finished under %s, ISR %v", leader, st.Leader, st.ISR)
	c.sameCommitLogs(st)
	c.settled("mko", 3)
	tr.delivered()
	ord.delivered()
}

// settled waits until no partition of topic is moving and each has its
// replicas all in sync, and returns their states.
func (c *testCluster) settled(topic string, replicas int) []cluster.PartitionState {
	c.t.Helper()
	var states []cluster.PartitionState
	testnode.Eventually(c.t, 90*time.Second, "every partition of "+topic+" in sync, none moving", func() bool {
		var err error
		if states, err = c.assign.List(context.Background(), topic); err != nil {
			return false
		}
		for _, st := range states {
			if st.Move.Active() || len(st.Catchup) > 0 || len(st.ISR) != replicas {
				return false
			}
		}
		return true
	})
	return states
}

// nodeEntry is a node's entry in /nodes, found by its TCP address.
func (c *testCluster) nodeEntry(via, id string) map[string]any {
	c.t.Helper()
	var doc struct {
		Producers []map[string]any `json:"producers"`
	}
	resp, err := http.Get("http://" + c.nodes[via].HTTP + "/nodes")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		c.t.Fatal(err)
	}
	for _, p := range doc.Producers {
		if p["remote_address"] == c.nodes[id].TCP {
			return p
		}
	}
	return nil
}

// Draining one of four nodes under load moves every replica and
// leadership off it, a few moves at a time; /nodes shows it removable once
// it holds nothing, its copies are deleted, and every acknowledged message
// is delivered. The node drained leads an ordered partition under its
// numbering producer and SUB_ORDERED consumer, which follows the
// leadership handed over: its acknowledged messages are delivered in
// publish order without going back past a confirmed FIN.
func TestDrainOneOfFourNodes(t *testing.T) {
	c := startCluster(t, 4, "--max-replica-moves", "2")
	c.createWithChannel("dr", 4, 3)
	tr := startTraffic(t, c, "dr", "ch")
	ord := startOrdered(t, c, "dro", 1, 3)
	gone := c.state("dro", 0).Leader
	// Four partitions of three replicas on four nodes, and the ordered one.
	if e := c.nodeEntry("n1", gone); e["replicas"] != 4.0 || e["draining"] != false {
		t.Fatalf("/nodes before the drain: %v", e)
	}
	if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/cluster/node/remove?remove_node="+gone, ""); code != 200 {
		t.Fatalf("drain: %d %s", code, body)
	}
	start := time.Now()
	testnode.Eventually(t, 90*time.Second, gone+" removable in /nodes", func() bool {
		e := c.nodeEntry("n1", gone)
		return e["removable"] == true && e["replicas"] == 0.0 && e["leading"] == 0.0
	})
	t.Logf("%s drained in %v", gone, time.Since(start).Round(time.Millisecond))
	for _, st := range slices.Concat(c.settled("dr", 3), c.settled("dro", 3)) {
		if slices.Contains(st.ISR, gone) {
			t.Fatalf("%s still holds %s/%d: %+v", gone, st.Topic, st.Partition, st)
		}
		testnode.Eventually(t, 30*time.Second, gone+" to drop its copies", func() bool {
			_, err := os.Stat(c.partitionDir(gone, st.Topic, st.Partition))
			return os.IsNotExist(err)
		})
	}
	t.Logf("settled and copies dropped %v after the drain began", time.Since(start).Round(time.Millisecond))
	tr.delivered()
	ord.delivered()
	t.Logf("delivered %v after the drain began", time.Since(start).Round(time.Millisecond))
}

// A node that joins a cluster of three whose partitions fill every node
// receives replicas from the balance, caught up under load, until it holds
// no fewer than the average rounded down minus one. Of the six partitions,
// four are an ordered topic's under a numbering producer and a SUB_ORDERED
// consumer each, so at least one of them moves: their acknowledged
// messages are delivered in publish order without going back past a
// confirmed FIN.
func TestBalanceMovesReplicasToAJoiningNode(t *testing.T) {
	c := startCluster(t, 3, "--balance-interval", "1s")
	c.createWithChannel("bl", 2, 3)
	tr := startTraffic(t, c, "bl", "ch")
	ord := startOrdered(t, c, "blo", 4, 3)
	c.nodes["n4"] = testnode.StartProcess(t, t.TempDir(), "--etcd-endpoints", c.etcdAddr, "--node-id", "n4", "--balance-interval", "1s")
	var orderedHeld int
	testnode.Eventually(t, 90*time.Second, "n4 to hold three replicas in sync", func() bool {
		held := map[string]int{}
		for _, st := range slices.Concat(c.settled("bl", 3), c.settled("blo", 3)) {
			if slices.Contains(st.ISR, "n4") {
				held[st.Topic]++
			}
		}
		orderedHeld = held["blo"]
		return held["bl"]+held["blo"] >= 3 // 18 replicas on 4 nodes: at least ⌊4.5⌋-1
	})
	// n4 holds at most one replica of each of bl's two partitions.
	if orderedHeld == 0 {
		t.Fatal("no ordered partition moved to n4")
	}
	tr.delivered()
	ord.delivered()
}

// Partitions never written to drain like any other. Their leader has no
// record to probe a new replica with, so it asks whether the replica's log
// is empty too: before, their moves waited for a first publish, and a drain
// of an idle topic never ended.
func TestDrainOfNeverWrittenPartitions(t *testing.T) {
	c := startCluster(t, 4, "--max-replica-moves", "2")
	c.createWithChannel("idle", 4, 3)
	gone := c.state("idle", 0).Leader
	if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/cluster/node/remove?remove_node="+gone, ""); code != 200 {
		t.Fatalf("drain: %d %s", code, body)
	}
	via := "n1"
	if gone == via {
		via = "n2"
	}
	start := time.Now()
	testnode.Eventually(t, 60*time.Second, gone+" removable in /nodes", func() bool {
		e := c.nodeEntry(via, gone)
		return e["removable"] == true && e["replicas"] == 0.0 && e["leading"] == 0.0
	})
	t.Logf("%s drained in %v", gone, time.Since(start).Round(time.Millisecond))
	for _, st := range c.settled("idle", 3) {
		if slices.Contains(st.ISR, gone) {
			t.Fatalf("%s still holds idle/%d: %+v", gone, st.Partition, st)
		}
		// The first write after the drain commits on the new replica set.
		q := fmt.Sprintf("/pub?topic=idle&partition=%d", st.Partition)
		if code, body := testnode.Post(t, c.nodes[st.Leader].HTTP, q, "first"); code != 200 {
			t.Fatalf("first publish to idle/%d after the drain: %d %s", st.Partition, code, body)
		}
	}
}
