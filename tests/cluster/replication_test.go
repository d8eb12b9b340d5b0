package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

func producer(t *testing.T, addr string) *nsq.Producer {
	t.Helper()
	p, err := nsq.NewProducer(addr, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	p.SetLoggerLevel(nsq.LogLevelError)
	t.Cleanup(p.Stop)
	return p
}

// Concurrent PUB and MPUB from several producers to a partition with three
// replicas: every write is on every replica when acknowledged, and the
// commit logs of leader and followers end byte-identical.
func TestReplicatedCommitLogsByteIdentical(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("rep", 3)
	if len(st.ISR) != 3 {
		t.Fatalf("ISR %v", st.ISR)
	}
	leader := c.nodes[st.Leader]
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			p := producer(t, leader.TCP)
			for i := 0; i < 100; i++ {
				var err error
				if i%2 == 0 {
					err = p.Publish("rep", []byte(fmt.Sprintf("%d-%d", w, i)))
				} else {
					err = p.MultiPublish("rep", [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
	want, err := os.ReadFile(c.commitLog(st.Leader, "rep"))
	if err != nil || len(want) == 0 {
		t.Fatalf("leader commit log: %d bytes, %v", len(want), err)
	}
	for _, f := range c.followers(st) {
		// Followers commit before they acknowledge, so they are complete now.
		got, err := os.ReadFile(c.commitLog(f, "rep"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("node %s commit log (%d bytes) differs from the leader's (%d bytes)", f, len(got), len(want))
		}
	}
}

// publishLoop publishes one message at a time until stopped, recording the
// longest wait for an acknowledgement and any error.
type publishLoop struct {
	acked   atomic.Int64
	longest atomic.Int64 // nanoseconds
	errs    chan error
	stop    atomic.Bool
	done    chan struct{}
}

func startPublishing(t *testing.T, addr, topic string) *publishLoop {
	l := &publishLoop{errs: make(chan error, 100), done: make(chan struct{})}
	p := producer(t, addr)
	go func() {
		defer close(l.done)
		for i := 0; !l.stop.Load(); i++ {
			start := time.Now()
			if err := p.Publish(topic, []byte(fmt.Sprint(i))); err != nil {
				l.errs <- err
				return
			}
			if d := int64(time.Since(start)); d > l.longest.Load() {
				l.longest.Store(d)
			}
			l.acked.Add(1)
		}
	}()
	return l
}

func (l *publishLoop) finish(t *testing.T) {
	t.Helper()
	l.stop.Store(true)
	<-l.done
	select {
	case err := <-l.errs:
		t.Fatalf("publish failed: %v", err)
	default:
	}
}

// Losing one replica of three, by SIGKILL or SIGSTOP, shrinks the ISR and
// the producer's writes go on; no write waits a second (without -race).
func TestOneReplicaLostWritesContinue(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startCluster(t, 3)
			st := c.createTopic("lose1", 3)
			victim := c.followers(st)[0]
			loop := startPublishing(t, c.nodes[st.Leader].TCP, "lose1")
			testnode.Eventually(t, 10*time.Second, "writes before the fault", func() bool { return loop.acked.Load() > 200 })
			before := loop.acked.Load()
			c.nodes[victim].Cmd.Process.Signal(sig)
			if sig == syscall.SIGSTOP {
				t.Cleanup(func() { c.nodes[victim].Cmd.Process.Signal(syscall.SIGCONT) })
			}
			testnode.Eventually(t, 10*time.Second, "ISR without the lost replica", func() bool {
				return len(c.state("lose1", 0).ISR) == 2
			})
			testnode.Eventually(t, 10*time.Second, "writes after the fault", func() bool { return loop.acked.Load() > before+200 })
			loop.finish(t)
			longest := time.Duration(loop.longest.Load())
			t.Logf("longest write while losing a replica: %v", longest)
			if !raceEnabled && longest >= time.Second {
				t.Fatalf("a write waited %v after a replica was lost", longest)
			}
			if isr := c.state("lose1", 0).ISR; strings.Contains(strings.Join(isr, ","), victim) {
				t.Fatalf("lost replica %s still in ISR %v", victim, isr)
			}
		})
	}
}

// Losing two replicas of three fails the write with
// E_FAILED_ON_NOT_WRITABLE; it was rolled back, so no consumer sees it.
func TestTwoReplicasLostWriteFailsUnseen(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("lose2", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=lose2&channel=watch", "")
	p := producer(t, leader.TCP)
	for i := 0; i < 10; i++ {
		if err := p.Publish("lose2", []byte(fmt.Sprint("ok-", i))); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range c.followers(st) {
		c.nodes[f].Kill(t)
	}
	err := p.Publish("lose2", []byte("lost"))
	if err == nil || !strings.Contains(err.Error(), "E_FAILED_ON_NOT_WRITABLE") {
		t.Fatalf("publish with two of three replicas gone: %v", err)
	}
	seen := map[string]bool{}
	testnode.Consume(t, leader.TCP, "lose2", "watch", 10*time.Second, func(b string) { seen[b] = true }, func() bool { return len(seen) >= 10 })
	if seen["lost"] {
		t.Fatal("a consumer saw the write that failed")
	}
}

// Channel offsets follow the leader: as a consumer FINs on the leader, the
// same channel's depth on every follower drops to match.
func TestChannelOffsetsReachFollowers(t *testing.T) {
	c := startCluster(t, 3, "--channel-persist-interval", "200ms")
	st := c.createTopic("offsets", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=offsets&channel=work", "")
	p := producer(t, leader.TCP)
	var batch [][]byte
	for i := 0; i < 100; i++ {
		batch = append(batch, []byte(fmt.Sprint(i)))
	}
	if err := p.MultiPublish("offsets", batch); err != nil {
		t.Fatal(err)
	}
	for _, f := range c.followers(st) {
		testnode.Eventually(t, 10*time.Second, "follower "+f+" to have the channel with depth 100", func() bool {
			return channelDepth(t, c.nodes[f].HTTP, "offsets", "work") == 100
		})
	}
	seen := 0
	testnode.Consume(t, leader.TCP, "offsets", "work", 10*time.Second, func(string) { seen++ }, func() bool { return seen >= 60 })
	leaderDepth := channelDepth(t, leader.HTTP, "offsets", "work")
	for _, f := range c.followers(st) {
		testnode.Eventually(t, 10*time.Second, "follower "+f+" depth to match the leader's", func() bool {
			return channelDepth(t, c.nodes[f].HTTP, "offsets", "work") <= leaderDepth
		})
	}
}

// Every node's /lookup names the partition's leader, so go-nsq pointed at
// any node's HTTP address consumes from the leader.
func TestLookupOnAnyNodeFindsTheLeader(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("found", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=found&channel=ch", "")
	if err := producer(t, leader.TCP).Publish("found", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	for id, n := range c.nodes {
		resp, err := http.Get("http://" + n.HTTP + "/lookup?topic=found")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Producers []struct {
				RemoteAddress string `json:"remote_address"`
			} `json:"producers"`
			Partitions map[string]struct {
				RemoteAddress string `json:"remote_address"`
			} `json:"partitions"`
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if len(doc.Producers) != 1 || doc.Producers[0].RemoteAddress != leader.TCP || doc.Partitions["0"].RemoteAddress != leader.TCP {
			t.Fatalf("node %s /lookup: %+v, want only the leader %s", id, doc, leader.TCP)
		}
	}
	follower := c.nodes[c.followers(st)[0]]
	cfg := nsq.NewConfig()
	cfg.LookupdPollInterval = time.Second
	cons, err := nsq.NewConsumer("found", "ch", cfg)
	if err != nil {
		t.Fatal(err)
	}
	cons.SetLoggerLevel(nsq.LogLevelError)
	got := make(chan string, 1)
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		select {
		case got <- string(m.Body):
		default:
		}
		return nil
	}))
	if err := cons.ConnectToNSQLookupd(follower.HTTP); err != nil {
		t.Fatal(err)
	}
	defer func() { cons.Stop(); <-cons.StopChan }()
	select {
	case b := <-got:
		if b != "hello" {
			t.Fatalf("got %q", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("nothing consumed through a follower's lookup")
	}
}

// A leader killed with SIGKILL is replaced within seconds by the ISR member
// with the most data; writes go on at the new leader, and every message
// acknowledged before or after is delivered from it.
func TestLeaderKilledFailover(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("failover", 3)
	old := c.nodes[st.Leader]
	testnode.Post(t, old.HTTP, "/channel/create?topic=failover&channel=ch", "")
	acked := map[string]bool{}
	p := producer(t, old.TCP)
	for i := 0; i < 200; i++ {
		b := fmt.Sprint("before-", i)
		if err := p.Publish("failover", []byte(b)); err != nil {
			t.Fatal(err)
		}
		acked[b] = true
	}
	old.Kill(t)
	killed := time.Now()
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("failover", 0).Leader
		return next != st.Leader
	})
	t.Logf("new leader %s elected %v after the old one was killed", next, time.Since(killed))
	if s := c.state("failover", 0); s.EpochForWrite <= st.EpochForWrite {
		t.Fatalf("epoch %d not above %d", s.EpochForWrite, st.EpochForWrite)
	}
	leader := c.nodes[next]
	p2 := producer(t, leader.TCP)
	testnode.Eventually(t, 10*time.Second, "writes at the new leader", func() bool {
		return p2.Publish("failover", []byte("probe")) == nil
	})
	t.Logf("writes accepted %v after the kill", time.Since(killed))
	for i := 0; i < 100; i++ {
		b := fmt.Sprint("after-", i)
		if err := p2.Publish("failover", []byte(b)); err != nil {
			t.Fatal(err)
		}
		acked[b] = true
	}
	got := map[string]bool{}
	testnode.Consume(t, leader.TCP, "failover", "ch", 20*time.Second, func(b string) { got[b] = true }, func() bool {
		for b := range acked {
			if !got[b] {
				return false
			}
		}
		return true
	})
}

// A PUB, MPUB or DPUB sent to a node that does not lead the partition is
// forwarded to the leader and its answer relayed: clients may publish to
// any node.
func TestPublishToAnyNodeIsForwarded(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("anywhere", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=anywhere&channel=ch", "")
	want := map[string]bool{}
	for _, f := range c.followers(st) {
		p := producer(t, c.nodes[f].TCP)
		b := "pub-via-" + f
		if err := p.Publish("anywhere", []byte(b)); err != nil {
			t.Fatalf("PUB to follower %s: %v", f, err)
		}
		want[b] = true
		batch := [][]byte{[]byte("mpub1-via-" + f), []byte("mpub2-via-" + f)}
		if err := p.MultiPublish("anywhere", batch); err != nil {
			t.Fatalf("MPUB to follower %s: %v", f, err)
		}
		want[string(batch[0])], want[string(batch[1])] = true, true
		d := "dpub-via-" + f
		if err := p.DeferredPublish("anywhere", 100*time.Millisecond, []byte(d)); err != nil {
			t.Fatalf("DPUB to follower %s: %v", f, err)
		}
		want[d] = true
	}
	got := map[string]bool{}
	testnode.Consume(t, leader.TCP, "anywhere", "ch", 10*time.Second, func(b string) { got[b] = true }, func() bool {
		for b := range want {
			if !got[b] {
				return false
			}
		}
		return true
	})
}

// SIGTERM of a leader revokes its registration at once, so the controller
// moves leadership without waiting for the lease to lapse; nothing
// acknowledged is lost.
func TestLeaderStoppedGracefullyHandsOver(t *testing.T) {
	c := startCluster(t, 3, "--node-lease-ttl", "10s")
	st := c.createTopic("handover", 3)
	old := c.nodes[st.Leader]
	testnode.Post(t, old.HTTP, "/channel/create?topic=handover&channel=ch", "")
	p := producer(t, old.TCP)
	acked := map[string]bool{}
	for i := 0; i < 100; i++ {
		b := fmt.Sprint(i)
		if err := p.Publish("handover", []byte(b)); err != nil {
			t.Fatal(err)
		}
		acked[b] = true
	}
	start := time.Now()
	old.Terminate(t, 30*time.Second)
	var next string
	testnode.Eventually(t, 8*time.Second, "a new leader well before the 10 s lease lapses", func() bool {
		next = c.state("handover", 0).Leader
		return next != st.Leader
	})
	t.Logf("leadership moved %v after SIGTERM", time.Since(start))
	got := map[string]bool{}
	testnode.Consume(t, c.nodes[next].TCP, "handover", "ch", 20*time.Second, func(b string) { got[b] = true }, func() bool { return len(got) >= len(acked) })
	for b := range acked {
		if !got[b] {
			t.Fatalf("acknowledged message %s lost", b)
		}
	}
}

// A replica that fell out of the ISR comes back: once reachable the leader
// sends it what it missed, and after it acknowledged a current write it
// rejoins the ISR with a log identical to the leader's.
func TestLaggingReplicaCatchesUpAndRejoins(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("rejoin", 3)
	leader := c.nodes[st.Leader]
	victim := c.followers(st)[0]
	p := producer(t, leader.TCP)
	publishN := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			if err := p.Publish("rejoin", []byte(fmt.Sprint(prefix, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publishN("a", 20)
	c.nodes[victim].Cmd.Process.Signal(syscall.SIGSTOP)
	publishN("b", 50) // the first of these shrinks the ISR
	if isr := c.state("rejoin", 0).ISR; len(isr) != 2 {
		t.Fatalf("ISR %v while %s is stopped", isr, victim)
	}
	if v := testnode.Metric(t, leader.HTTP, "partita_partition_under_replicated", `topic="rejoin"`); v != "1" {
		t.Fatalf("under_replicated %q with a replica out of the ISR", v)
	}
	c.nodes[victim].Cmd.Process.Signal(syscall.SIGCONT)
	i := 0
	testnode.Eventually(t, 20*time.Second, victim+" back in the ISR", func() bool {
		publishN(fmt.Sprint("c", i, "-"), 1)
		i++
		return len(c.state("rejoin", 0).ISR) == 3
	})
	publishN("d", 20)
	if v := testnode.Metric(t, leader.HTTP, "partita_partition_isr_size", `topic="rejoin"`); v != "3" {
		t.Fatalf("isr_size %q after the rejoin", v)
	}
	want, err := os.ReadFile(c.commitLog(st.Leader, "rejoin"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(c.commitLog(victim, "rejoin"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("rejoined replica's commit log (%d bytes) differs from the leader's (%d bytes)", len(got), len(want))
	}
}

// A channel created through any node exists cluster-wide at once: the
// leader keeps for it what is published before a consumer connects.
func TestChannelCreatedOnAnyNodeIsClusterWide(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("chwide", 3)
	follower := c.nodes[c.followers(st)[0]]
	if code, body := testnode.Post(t, follower.HTTP, "/channel/create?topic=chwide&channel=late", ""); code != 200 {
		t.Fatalf("channel create on a follower: %d %s", code, body)
	}
	leader := c.nodes[st.Leader]
	testnode.Eventually(t, 10*time.Second, "the channel on the leader", func() bool {
		return channelDepth(t, leader.HTTP, "chwide", "late") >= 0
	})
	p := producer(t, leader.TCP)
	for i := 0; i < 10; i++ {
		if err := p.Publish("chwide", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]bool{}
	testnode.Consume(t, leader.TCP, "chwide", "late", 10*time.Second, func(b string) { got[b] = true }, func() bool { return len(got) == 10 })
}

// Behaviour 21 (docs/replication.md#resume-after-failover): after a failover
// the channel resumes from the confirmed offset replicated to the followers:
// messages confirmed before are not delivered again, the rest are.
func TestBehaviour21ChannelResumesFromReplicatedOffsetAfterFailover(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("resume", 3)
	old := c.nodes[st.Leader]
	testnode.Post(t, old.HTTP, "/channel/create?topic=resume&channel=ch", "")
	p := producer(t, old.TCP)
	var batch [][]byte
	for i := 0; i < 200; i++ {
		batch = append(batch, []byte(fmt.Sprint(i)))
	}
	if err := p.MultiPublish("resume", batch); err != nil {
		t.Fatal(err)
	}
	// Consume in order with one message in flight, so what is FINished is
	// a prefix and confirmed covers it.
	finished := map[string]bool{}
	cfg := nsq.NewConfig()
	cons, _ := nsq.NewConsumer("resume", "ch", cfg)
	cons.SetLoggerLevel(nsq.LogLevelError)
	var mu sync.Mutex
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if len(finished) >= 100 {
			return fmt.Errorf("enough") // REQ: stays unconfirmed
		}
		finished[string(m.Body)] = true
		return nil
	}))
	if err := cons.ConnectToNSQD(old.TCP); err != nil {
		t.Fatal(err)
	}
	testnode.Eventually(t, 10*time.Second, "100 messages finished", func() bool { mu.Lock(); defer mu.Unlock(); return len(finished) >= 100 })
	cons.Stop()
	<-cons.StopChan
	for _, f := range c.followers(st) {
		testnode.Eventually(t, 10*time.Second, "the confirmed offset on "+f, func() bool {
			return channelDepth(t, c.nodes[f].HTTP, "resume", "ch") <= 100
		})
	}
	old.Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("resume", 0).Leader
		return next != st.Leader
	})
	var again []string
	rest := map[string]bool{}
	testnode.Consume(t, c.nodes[next].TCP, "resume", "ch", 20*time.Second, func(b string) {
		if finished[b] {
			again = append(again, b)
		}
		rest[b] = true
	}, func() bool { return len(rest) >= 100 })
	if len(again) > 0 {
		t.Fatalf("%d confirmed messages delivered again after failover, e.g. %v", len(again), again[:min(5, len(again))])
	}
	for i := 0; i < 200; i++ {
		if b := fmt.Sprint(i); !finished[b] && !rest[b] {
			t.Fatalf("message %s lost", b)
		}
	}
}

// A replica restarted on a wiped data directory (external etcd keeps the
// cluster's state) is caught up by the leader from the start of its log and
// rejoins the ISR with an identical commit log.
func TestWipedReplicaCatchesUpFromScratch(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("wiped", 3)
	leader := c.nodes[st.Leader]
	victim := c.followers(st)[0]
	p := producer(t, leader.TCP)
	publishN := func(prefix string, n int) {
		for i := 0; i < n; i++ {
			if err := p.Publish("wiped", []byte(fmt.Sprint(prefix, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publishN("a", 50)
	old := c.nodes[victim]
	old.Kill(t)
	publishN("b", 20) // shrinks the ISR
	if err := os.RemoveAll(old.DataPath); err != nil {
		t.Fatal(err)
	}
	c.nodes[victim] = testnode.StartProcess(t, old.DataPath, "--etcd-endpoints", c.etcdAddr, "--node-id", victim)
	i := 0
	testnode.Eventually(t, 30*time.Second, victim+" back in the ISR", func() bool {
		publishN(fmt.Sprint("c", i, "-"), 1)
		i++
		return len(c.state("wiped", 0).ISR) == 3
	})
	publishN("d", 10)
	want, _ := os.ReadFile(c.commitLog(st.Leader, "wiped"))
	got, _ := os.ReadFile(c.commitLog(victim, "wiped"))
	if len(want) == 0 || !bytes.Equal(got, want) {
		t.Fatalf("wiped replica's commit log (%d bytes) differs from the leader's (%d bytes)", len(got), len(want))
	}
}

// A topic deleted through any node is gone from every node, files and all;
// created again, it starts empty everywhere.
func TestTopicDeleteIsClusterWide(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("gone", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=gone&channel=ch", "")
	if err := producer(t, leader.TCP).Publish("gone", []byte("old")); err != nil {
		t.Fatal(err)
	}
	follower := c.nodes[c.followers(st)[0]]
	if code, body := testnode.Post(t, follower.HTTP, "/topic/delete?topic=gone", ""); code != 200 {
		t.Fatalf("delete through a follower: %d %s", code, body)
	}
	for id, n := range c.nodes {
		testnode.Eventually(t, 10*time.Second, "topic files gone on "+id, func() bool {
			_, err := os.Stat(filepath.Join(n.DataPath, "topics", "gone"))
			return os.IsNotExist(err)
		})
	}
	st2 := c.createTopic("gone", 3)
	leader2 := c.nodes[st2.Leader]
	testnode.Post(t, leader2.HTTP, "/channel/create?topic=gone&channel=ch", "")
	if err := producer(t, leader2.TCP).Publish("gone", []byte("new")); err != nil {
		t.Fatal(err)
	}
	got := []string{}
	testnode.Consume(t, leader2.TCP, "gone", "ch", 10*time.Second, func(b string) { got = append(got, b) }, func() bool { return len(got) >= 1 })
	if len(got) != 1 || got[0] != "new" {
		t.Fatalf("recreated topic delivered %v, want only [new]", got)
	}
}

// A SUB made on a node that leads nothing of the topic answers OK and
// starts delivering when the node becomes a leader: consumers connected
// straight to the followers receive, after a failover, without reconnecting.
func TestSubGainsPartitionsWhenItsNodeBecomesLeader(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("gain", 3)
	old := c.nodes[st.Leader]
	testnode.Post(t, old.HTTP, "/channel/create?topic=gain&channel=ch", "")
	var mu sync.Mutex
	got := map[string]bool{}
	for _, f := range c.followers(st) {
		cons, err := nsq.NewConsumer("gain", "ch", nsq.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		cons.SetLoggerLevel(nsq.LogLevelError)
		cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
			mu.Lock()
			got[string(m.Body)] = true
			mu.Unlock()
			return nil
		}))
		if err := cons.ConnectToNSQD(c.nodes[f].TCP); err != nil {
			t.Fatal(err)
		}
		defer cons.Stop()
	}
	old.Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("gain", 0).Leader
		return next != st.Leader
	})
	p := producer(t, c.nodes[next].TCP)
	testnode.Eventually(t, 10*time.Second, "writes at the new leader", func() bool { return p.Publish("gain", []byte("after")) == nil })
	testnode.Eventually(t, 10*time.Second, "delivery on the existing connection", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got["after"]
	})
}
