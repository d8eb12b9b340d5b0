package cluster

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// Under publishing from producers on all three nodes, kill -9 of a
// partition leader: with the default timers a new leader takes writes within
// 3 s (asserted without -race), and a consumer connected through lookupd
// receives every acknowledged message (duplicates allowed).
//
// Run it 20 times in a row with
//
//	go test -run TestFailoverUnderLoad -count=20 ./tests/cluster/
func TestFailoverUnderLoad(t *testing.T) {
	c := startCluster(t, 3)
	code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=load&partition_num=2&replicator=3", "")
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	testnode.Post(t, c.nodes["n2"].HTTP, "/channel/create?topic=load&channel=ch", "")
	victimID := c.state("load", 0).Leader

	var mu sync.Mutex
	acked := map[string]bool{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for id, n := range c.nodes {
		wg.Add(1)
		go func(id, addr string) {
			defer wg.Done()
			p, err := nsq.NewProducer(addr, nsq.NewConfig())
			if err != nil {
				return
			}
			p.SetLoggerLevel(nsq.LogLevelError)
			defer p.Stop()
			for i := 0; !stop.Load(); i++ {
				b := fmt.Sprintf("%s-%d", id, i)
				if err := p.Publish("load", []byte(b)); err != nil {
					if id == victimID {
						return // its node is gone
					}
					continue // no leader for a moment: the failover
				}
				mu.Lock()
				acked[b] = true
				mu.Unlock()
			}
		}(id, n.TCP)
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	testnode.Eventually(t, 20*time.Second, "publishing before the fault", func() bool { return count() > 500 })

	c.nodes[victimID].Kill(t)
	killed := time.Now()
	survivor := c.nodes["n1"]
	if victimID == "n1" {
		survivor = c.nodes["n2"]
	}
	testnode.Eventually(t, 20*time.Second, "partition 0 taking writes again", func() bool {
		resp, err := http.Post("http://"+survivor.HTTP+"/pub?topic=load&partition=0", "text/plain", strings.NewReader("probe"))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	took := time.Since(killed)
	t.Logf("partition 0 took writes again %v after kill -9 of its leader %s", took, victimID)
	before := count()
	testnode.Eventually(t, 20*time.Second, "publishing after the failover", func() bool { return count() > before+500 })
	stop.Store(true)
	wg.Wait()
	if !raceEnabled && took > 3*time.Second {
		t.Fatalf("writes resumed %v after the leader died, want under 3 s", took)
	}

	var lookups []string
	for id, n := range c.nodes {
		if id != victimID {
			lookups = append(lookups, n.HTTP)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	deliversAll(t, lookups, "load", "ch", acked)
}

// lookupConsumer consumes topic/channel through the lookups, up to 200
// messages in flight, handing each to got.
func lookupConsumer(t *testing.T, lookups []string, topic, channel string, got func(*nsq.Message)) *nsq.Consumer {
	t.Helper()
	return lookupConsumerInFlight(t, lookups, topic, channel, 200, got)
}

// lookupConsumerInFlight is lookupConsumer with inFlight messages in
// flight at most.
func lookupConsumerInFlight(t *testing.T, lookups []string, topic, channel string, inFlight int, got func(*nsq.Message)) *nsq.Consumer {
	t.Helper()
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = inFlight
	cfg.LookupdPollInterval = time.Second
	cons, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cons.SetLoggerLevel(nsq.LogLevelError)
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error { got(m); return nil }))
	if err := cons.ConnectToNSQLookupds(lookups); err != nil {
		t.Fatal(err)
	}
	return cons
}

// deliversAll consumes topic/channel through the nodes' lookups until every
// body in acked was delivered.
func deliversAll(t *testing.T, lookups []string, topic, channel string, acked map[string]bool) {
	t.Helper()
	deliversAllInFlight(t, lookups, topic, channel, 200, acked)
}

// deliversAllInFlight is deliversAll with inFlight messages in flight at
// most: a topic of many partitions gives each connection a share of it.
func deliversAllInFlight(t *testing.T, lookups []string, topic, channel string, inFlight int, acked map[string]bool) {
	t.Helper()
	d := consumeAll(t, lookups, []string{topic}, channel, inFlight)
	defer d.stop()
	d.await(t, acked, 60*time.Second)
}

// delivery consumes topics' channel through the lookups, one consumer a
// topic, and keeps every body delivered, so that a test can attach its
// consumers before a fault and ask afterwards whether everything it
// published came.
type delivery struct {
	cons []*nsq.Consumer

	// The handler counts what it receives and says when the last wanted
	// body came: the wait costs nothing while messages flow, where
	// listing what is missing every few milliseconds would hold the
	// handler's lock for longer than it takes to deliver them.
	mu          sync.Mutex
	got         map[string]bool
	want        map[string]bool
	wanted      int
	all         chan struct{}
	start, last time.Time // the consumers' start and the last new body's arrival
}

func consumeAll(t *testing.T, lookups, topics []string, channel string, inFlight int) *delivery {
	t.Helper()
	d := &delivery{got: map[string]bool{}, start: time.Now()}
	d.last = d.start
	for _, topic := range topics {
		d.cons = append(d.cons, lookupConsumerInFlight(t, lookups, topic, channel, inFlight, d.received))
	}
	return d
}

func (d *delivery) received(m *nsq.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	b := string(m.Body)
	if d.got[b] {
		return
	}
	d.got[b] = true
	d.last = time.Now()
	if d.want[b] {
		if d.wanted++; d.wanted == len(d.want) {
			close(d.all)
		}
	}
}

// await fails t unless every body of acked is delivered within the wait.
func (d *delivery) await(t *testing.T, acked map[string]bool, within time.Duration) {
	t.Helper()
	d.mu.Lock()
	d.want, d.wanted, d.all = acked, 0, make(chan struct{})
	for b := range acked {
		if d.got[b] {
			d.wanted++
		}
	}
	all := d.all
	if d.wanted == len(acked) {
		close(all)
	}
	d.mu.Unlock()
	select {
	case <-all:
		return
	case <-time.After(within):
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var missing []string
	for b := range acked {
		if !d.got[b] {
			missing = append(missing, b)
		}
	}
	sort.Strings(missing)
	// A consumer that stopped receiving long before the deadline was
	// stalled; one that kept receiving was merely slow.
	t.Fatalf("%d of %d acknowledged messages never delivered, e.g. %v; the last new one came %v after the consumers started, then nothing for %v",
		len(missing), len(acked), missing[:min(10, len(missing))], d.last.Sub(d.start).Round(time.Millisecond), time.Since(d.last).Round(time.Millisecond))
}

func (d *delivery) stop() {
	for _, c := range d.cons {
		c.Stop()
	}
	for _, c := range d.cons {
		<-c.StopChan
	}
}
