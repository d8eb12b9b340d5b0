package cluster

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

// netLab is a bridge in the test's namespace and one network namespace per
// node, on a private subnet: the bridge holds .1 (the test's clients) and
// .2 (etcd), node i holds .1<i>. Cutting a node off is a blackhole route in
// its namespace, so it loses the other nodes and etcd while the test still
// reaches it.
type netLab struct {
	t      *testing.T
	id     string
	subnet string // first three octets
	bridge string
	nodes  []string
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func newNetLab(t *testing.T, nodes ...string) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the network-partition test makes network namespaces and needs root")
	}
	id := fmt.Sprintf("%04x", rand.IntN(1<<16))
	l := &netLab{t: t, id: id, subnet: fmt.Sprintf("10.%d.%d", 100+rand.IntN(100), rand.IntN(250)), bridge: "ptbr" + id, nodes: nodes}
	t.Cleanup(l.remove)
	run(t, "ip", "link", "add", l.bridge, "type", "bridge")
	run(t, "ip", "addr", "add", l.subnet+".1/24", "dev", l.bridge)
	run(t, "ip", "addr", "add", l.subnet+".2/24", "dev", l.bridge)
	run(t, "ip", "link", "set", l.bridge, "up")
	for i, n := range nodes {
		ns, host, peer := l.ns(n), fmt.Sprintf("ptv%s%d", id, i), fmt.Sprintf("ptp%s%d", id, i)
		run(t, "ip", "netns", "add", ns)
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		run(t, "ip", "link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
		run(t, "ip", "link", "set", host, "master", l.bridge)
		run(t, "ip", "link", "set", host, "up")
		run(t, "ip", "-n", ns, "addr", "add", l.addr(n)+"/24", "dev", peer)
		run(t, "ip", "-n", ns, "link", "set", peer, "up")
	}
	return l
}

func (l *netLab) ns(node string) string { return "pt" + l.id + "-" + node }

func (l *netLab) addr(node string) string {
	return fmt.Sprintf("%s.%d", l.subnet, 11+slices.Index(l.nodes, node))
}

func (l *netLab) etcdHost() string { return l.subnet + ".2" }

func (l *netLab) remove() {
	for _, n := range l.nodes {
		exec.Command("ip", "netns", "del", l.ns(n)).Run()
	}
	exec.Command("ip", "link", "del", l.bridge).Run()
}

// cut drops everything node sends to the other nodes and to etcd.
func (l *netLab) cut(node string) {
	for _, dst := range l.others(node) {
		run(l.t, "ip", "-n", l.ns(node), "route", "add", "blackhole", dst+"/32")
	}
}

func (l *netLab) heal(node string) {
	for _, dst := range l.others(node) {
		run(l.t, "ip", "-n", l.ns(node), "route", "del", "blackhole", dst+"/32")
	}
}

func (l *netLab) others(node string) []string {
	out := []string{l.etcdHost()}
	for _, n := range l.nodes {
		if n != node {
			out = append(out, l.addr(n))
		}
	}
	return out
}

// A leader cut off from the other nodes and from etcd cannot commit: no
// publish to it is acknowledged once a write's timeout has passed, while
// the others elect a new leader and take writes. After healing it follows
// the new leader, its uncommitted tail is cut, its logs equal the new
// leader's, and every acknowledged message is delivered.
func TestPartitionedLeaderCannotCommitAndConvergesAfterHealing(t *testing.T) {
	ids := []string{"n1", "n2", "n3"}
	lab := newNetLab(t, ids...)
	etcd := startSystemEtcdOn(t, lab.etcdHost(), 2379)
	endpoint := etcd.Endpoint
	c := &testCluster{t: t, etcdAddr: endpoint, cli: etcd.Client, assign: cluster.NewAssignments(etcd.Client, "/partita/"), nodes: map[string]*testnode.Process{}}
	for _, id := range ids {
		ip := lab.addr(id)
		dir := t.TempDir()
		c.nodes[id] = testnode.StartProcessIn(t, lab.ns(id), dir, "--data-path", dir,
			"--tcp-address", ip+":4150", "--http-address", ip+":4151", "--cluster-address", ip+":4152",
			"--node-id", id, "--etcd-endpoints", endpoint, "--log-level", "warn")
	}
	st := c.createTopic("split", 3)
	old := st.Leader
	testnode.Post(t, c.nodes[old].HTTP, "/channel/create?topic=split&channel=all", "")
	others := slices.DeleteFunc(slices.Clone(ids), func(n string) bool { return n == old })

	var mu sync.Mutex
	acked := map[string]bool{}
	var cutAt, healAt time.Time
	// Publishes to the cut-off leader sent after a write's timeout had
	// passed since the cut and answered OK before the heal.
	lateAcks := 0
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, id := range []string{old, others[0]} {
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			p := producer(t, c.nodes[id].TCP)
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf("%s-%d", id, i)
				sent := time.Now()
				if err := p.Publish("split", []byte(body)); err != nil {
					continue
				}
				mu.Lock()
				acked[body] = true
				cutOff := !cutAt.IsZero() && sent.Sub(cutAt) > 6*time.Second && healAt.IsZero()
				if id == old && cutOff {
					lateAcks++
				}
				mu.Unlock()
			}
		}(id)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testnode.Eventually(t, 15*time.Second, "publishing before the cut", func() bool { return count() >= 100 })

	mu.Lock()
	cutAt = time.Now()
	mu.Unlock()
	lab.cut(old)
	testnode.Eventually(t, 15*time.Second, "another leader", func() bool { return c.state("split", 0).Leader != old })
	newLeader := c.state("split", 0).Leader
	before := count()
	testnode.Eventually(t, 20*time.Second, "publishing through the new leader", func() bool { return count() >= before+300 })
	committedWhileCut := statsMessages(t, c.nodes[old].HTTP, "split")
	testnode.Eventually(t, 20*time.Second, "more publishing through the new leader", func() bool { return count() >= before+600 })
	if now := statsMessages(t, c.nodes[old].HTTP, "split"); now != committedWhileCut {
		t.Fatalf("the cut-off old leader committed while cut off: %d messages, then %d", committedWhileCut, now)
	}

	mu.Lock()
	healAt = time.Now()
	mu.Unlock()
	lab.heal(old)
	testnode.Eventually(t, 30*time.Second, "the old leader back in the ISR", func() bool {
		return slices.Contains(c.state("split", 0).ISR, old)
	})
	stop.Store(true)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if lateAcks > 0 {
		t.Fatalf("%d publishes to the cut-off leader acknowledged after the cut", lateAcks)
	}
	deliversAll(t, []string{c.nodes[others[1]].HTTP}, "split", "all", acked)
	deadline := time.Now().Add(15 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; ; <-tick.C {
		a, errA := os.ReadFile(c.commitLog(old, "split"))
		b, errB := os.ReadFile(c.commitLog(newLeader, "split"))
		if errA == nil && errB == nil && len(a) > 0 && bytes.Equal(a, b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the old leader's commit log differs from the new leader's:\n%s", describeDifference(a, b))
		}
	}
}

// describeDifference names the first commit record where two commit logs
// differ, and their lengths.
func describeDifference(a, b []byte) string {
	ra, rb := len(a)/storage.CommitRecordSize, len(b)/storage.CommitRecordSize
	for i := 0; i < min(ra, rb); i++ {
		x, y := a[i*storage.CommitRecordSize:(i+1)*storage.CommitRecordSize], b[i*storage.CommitRecordSize:(i+1)*storage.CommitRecordSize]
		if !bytes.Equal(x, y) {
			return fmt.Sprintf("record %d of %d/%d differs: %+v vs %+v", i, ra, rb, storage.UnmarshalCommitRecord(x), storage.UnmarshalCommitRecord(y))
		}
	}
	return fmt.Sprintf("one is a prefix of the other: %d vs %d records", ra, rb)
}

// statsMessages is what node's /stats counts for topic's partitions.
func statsMessages(t *testing.T, hostport, topic string) int64 {
	t.Helper()
	var stats struct {
		Topics []struct {
			TopicName    string `json:"topic_name"`
			MessageCount int64  `json:"message_count"`
		} `json:"topics"`
	}
	getJSONInto(t, hostport, "/stats?format=json&topic="+topic, &stats)
	var n int64
	for _, tp := range stats.Topics {
		if tp.TopicName == topic {
			n += tp.MessageCount
		}
	}
	return n
}
