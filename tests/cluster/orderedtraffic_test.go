package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// orderedTraffic runs an orderedStream on each partition of an ordered
// topic while a test moves its replicas, and judges each at the end.
type orderedTraffic struct {
	t            *testing.T
	c            *testCluster
	topic        string
	mu           sync.Mutex
	streams      []orderedStream
	stopPub      chan struct{}
	stopSub      chan struct{}
	pubs, subs   sync.WaitGroup
	pubsStopped  sync.Once
	subsStopped  sync.Once
	startedAfter time.Time
}

// createOrdered makes an ordered topic and its channel seq through node 1.
func (c *testCluster) createOrdered(topic string, partitions, replicas int) {
	c.t.Helper()
	q := fmt.Sprintf("/topic/create?topic=%s&partition_num=%d&replicator=%d&ordered=true", topic, partitions, replicas)
	if code, body := testnode.Post(c.t, c.nodes["n1"].HTTP, q, ""); code != 200 {
		c.t.Fatalf("create %s: %d %s", topic, code, body)
	}
	if code, body := testnode.Post(c.t, c.nodes["n1"].HTTP, "/channel/create?topic="+topic+"&channel=seq", ""); code != 200 {
		c.t.Fatalf("channel seq of %s: %d %s", topic, code, body)
	}
}

// startOrdered creates an ordered topic of the given partitions and
// replicas, starts a stream on each partition and returns once each had
// messages acknowledged and delivered.
func startOrdered(t *testing.T, c *testCluster, topic string, partitions, replicas int) *orderedTraffic {
	c.createOrdered(topic, partitions, replicas)
	// A channel a node opens after a publish starts at the log's end.
	testnode.Eventually(t, 10*time.Second, "every node to hold channel seq of "+topic, func() bool { return c.channelsOpen(topic, "seq") })
	o := &orderedTraffic{t: t, c: c, topic: topic, stopPub: make(chan struct{}), stopSub: make(chan struct{}), startedAfter: time.Now()}
	t.Cleanup(o.stop)
	for p := range int32(partitions) {
		o.add(p)
	}
	t.Logf("ordered %s delivering %v after its creation", topic, time.Since(o.startedAfter).Round(time.Millisecond))
	return o
}

// add starts a stream on partition p (a partition an expand created) and
// waits until it has messages acknowledged and delivered.
func (o *orderedTraffic) add(p int32) {
	o.t.Helper()
	s := orderedStream{c: o.c, topic: o.topic, channel: "seq", p: p, h: newHistory(), maxAhead: 50}
	o.mu.Lock()
	o.streams = append(o.streams, s)
	o.mu.Unlock()
	o.pubs.Go(func() { s.publish(o.stopPub) })
	o.subs.Go(func() { s.consume(o.stopSub) })
	testnode.Eventually(o.t, 30*time.Second, fmt.Sprintf("ordered %s/%d publishing and delivering", o.topic, p), func() bool {
		acked, delivered := s.h.ordered()
		return acked > 20 && delivered > 20
	})
}

func (o *orderedTraffic) stop() {
	o.pubsStopped.Do(func() { close(o.stopPub); o.pubs.Wait() })
	o.subsStopped.Do(func() { close(o.stopSub); o.subs.Wait() })
}

// orderedReached is the highest number the ordered channel delivered, -1
// before the first.
func (h *history) orderedReached() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ordReached
}

// ordered is how many ordered messages were acknowledged and delivered.
func (h *history) ordered() (acked, delivered int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ordAcked), len(h.ordDeliveries)
}

// delivered stops the producers, waits until every acknowledged message of
// every partition was delivered, stops the consumers, and fails the test
// unless each partition delivered in publish order, never going back past
// a message whose FIN was confirmed.
func (o *orderedTraffic) delivered() {
	o.t.Helper()
	o.pubsStopped.Do(func() { close(o.stopPub); o.pubs.Wait() })
	o.mu.Lock()
	streams := o.streams
	o.mu.Unlock()
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	backlog := 0
	for _, s := range streams {
		backlog += s.h.missing()
	}
	for _, s := range streams {
		for s.h.missing() > 0 && time.Now().Before(deadline) {
			<-time.After(50 * time.Millisecond)
		}
	}
	drained := time.Since(start)
	o.subsStopped.Do(func() { close(o.stopSub); o.subs.Wait() })
	o.t.Logf("ordered %s: %d undelivered when the producers stopped, drained in %v", o.topic, backlog, drained.Round(time.Millisecond))
	for _, s := range streams {
		v := s.h.check(o.startedAfter, time.Now())
		if !v.strictOK() {
			o.t.Fatalf("ordered %s/%d: %v: %s", o.topic, s.p, v, v.problems())
		}
		o.t.Logf("ordered %s/%d: %d acknowledged, every one delivered in order; %d duplicates, %d rewinds to an unconfirmed message", o.topic, s.p, v.Acknowledged, v.Duplicated, v.Rewinds)
	}
}
