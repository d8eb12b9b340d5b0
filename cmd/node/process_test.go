package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// A node killed with SIGKILL while producers publish loses no message it
// acknowledged: after a restart every acknowledged body is delivered.
func TestKill9WhilePublishingLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	p := testnode.StartProcess(t, dir)

	var mu sync.Mutex
	acked := map[string]bool{}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			prod, err := nsq.NewProducer(p.TCP, nsq.NewConfig())
			if err != nil {
				return
			}
			prod.SetLoggerLevel(nsq.LogLevelError)
			defer prod.Stop()
			for i := 0; !stop.Load(); i++ {
				var err error
				var bodies []string
				if i%2 == 0 {
					bodies = []string{fmt.Sprintf("w%d-%d", w, i)}
					err = prod.Publish("durable", []byte(bodies[0]))
				} else {
					var batch [][]byte
					for j := 0; j < 10; j++ {
						bodies = append(bodies, fmt.Sprintf("w%d-%d-%d", w, i, j))
						batch = append(batch, []byte(bodies[j]))
					}
					err = prod.MultiPublish("durable", batch)
				}
				if err != nil {
					return // the node died under us
				}
				mu.Lock()
				for _, b := range bodies {
					acked[b] = true
				}
				mu.Unlock()
			}
		}(w)
	}
	testnode.Eventually(t, 30*time.Second, "acknowledged publishes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 5000
	})
	p.Kill(t)
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	want := len(acked)
	mu.Unlock()
	p2 := testnode.StartProcess(t, dir)
	got := map[string]bool{}
	testnode.Consume(t, p2.TCP, "durable", "after-crash", 60*time.Second, func(b string) { got[b] = true }, func() bool {
		for b := range acked {
			if !got[b] {
				return false
			}
		}
		return true
	})
	t.Logf("%d acknowledged messages, all delivered after kill -9 and restart", want)
}

// After SIGTERM and a restart, messages FINished before are not delivered
// again, and every other message still is.
func TestSigtermRestartDoesNotRedeliverFinished(t *testing.T) {
	dir := t.TempDir()
	p := testnode.StartProcess(t, dir)
	if code, body := testnode.Post(t, p.HTTP, "/channel/create?topic=orders&channel=billing", ""); code != 404 {
		t.Fatalf("channel on a missing topic: %d %s", code, body)
	}
	testnode.Post(t, p.HTTP, "/topic/create?topic=orders", "")
	testnode.Post(t, p.HTTP, "/channel/create?topic=orders&channel=billing", "")

	prod, err := nsq.NewProducer(p.TCP, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	const total = 2000
	for i := 0; i < total; i += 100 {
		var batch [][]byte
		for j := i; j < i+100; j++ {
			batch = append(batch, []byte(strconv.Itoa(j)))
		}
		if err := prod.MultiPublish("orders", batch); err != nil {
			t.Fatal(err)
		}
	}
	prod.Stop()

	finished := map[string]bool{}
	testnode.Consume(t, p.TCP, "orders", "billing", 30*time.Second, func(b string) { finished[b] = true }, func() bool { return len(finished) >= total/2 })
	// go-nsq drops the FIN of a message whose handler returns as the
	// consumer stops: the node never hears of it and delivers it again,
	// rightly. How many FINs reached it is what its channel no longer
	// holds once the closed connection's in-flight messages are back.
	var depth, inFlight int
	testnode.Eventually(t, 10*time.Second, "the closed consumer's messages back in the channel", func() bool {
		depth, inFlight = channelCounts(t, p.HTTP, "orders", "billing")
		return inFlight == 0
	})
	unheard := len(finished) - (total - depth)
	took := p.Terminate(t, 30*time.Second)
	t.Logf("SIGTERM to exit: %v; %d messages finished before, the FINs of %d of them unheard by the node", took, len(finished), unheard)

	p2 := testnode.StartProcess(t, dir)
	again := map[string]bool{}
	var redelivered []string
	testnode.Consume(t, p2.TCP, "orders", "billing", 30*time.Second, func(b string) {
		if finished[b] {
			redelivered = append(redelivered, b)
		}
		again[b] = true
	}, func() bool { return len(again)+len(finished)-len(redelivered) >= total })
	if len(redelivered) > max(unheard, 0) {
		t.Fatalf("%d finished messages delivered again after a clean restart, e.g. %v; the node had heard the FINs of all but %d", len(redelivered), redelivered[:min(5, len(redelivered))], unheard)
	}
	for i := 0; i < total; i++ {
		if b := strconv.Itoa(i); !finished[b] && !again[b] {
			t.Fatalf("message %s never delivered", b)
		}
	}
}

// --gc-percent sets the node's garbage collection target, 400 by default;
// a GOGC environment variable applies only while the flag is not set.
func TestGCPercent(t *testing.T) {
	gogc := func(extra ...string) string {
		p := testnode.StartProcess(t, t.TempDir(), extra...)
		defer p.Terminate(t, 10*time.Second)
		return testnode.Metric(t, p.HTTP, "go_gc_gogc_percent", "")
	}
	t.Setenv("GOGC", "")
	if got := gogc(); got != "400" {
		t.Fatalf("default GC target %q, want 400", got)
	}
	t.Setenv("GOGC", "150")
	if got := gogc(); got != "150" {
		t.Fatalf("GC target with GOGC=150 %q, want 150", got)
	}
	if got := gogc("--gc-percent", "250"); got != "250" {
		t.Fatalf("GC target with GOGC=150 and --gc-percent=250 %q, want 250", got)
	}
}

// --etcd-data-path puts the embedded etcd's data where it says, apart
// from the partitions', and a restart finds the cluster's metadata there.
func TestEtcdDataPathHoldsTheEmbeddedMember(t *testing.T) {
	dir, etcdDir := t.TempDir(), t.TempDir()
	p := testnode.StartProcess(t, dir, "--etcd-data-path", etcdDir)
	if code, body := testnode.Post(t, p.HTTP, "/topic/create?topic=placed&partition_num=2", ""); code != 200 {
		t.Fatalf("creating a topic: %d %s", code, body)
	}
	if _, err := os.Stat(filepath.Join(etcdDir, "member", "wal")); err != nil {
		t.Fatalf("no etcd member in --etcd-data-path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "etcd")); !os.IsNotExist(err) {
		t.Fatalf("an etcd directory in --data-path besides --etcd-data-path: %v", err)
	}
	p.Terminate(t, 30*time.Second)
	p = testnode.StartProcess(t, dir, "--etcd-data-path", etcdDir)
	if code, body := testnode.Get(t, p.HTTP, "/lookup?topic=placed"); code != 200 || !strings.Contains(body, `"1":{`) {
		t.Fatalf("the topic after a restart on the same --etcd-data-path: %d %s", code, body)
	}
}

// channelCounts is a channel's depth and in-flight count from the node's
// /stats.
func channelCounts(t *testing.T, hostport, topic, channel string) (depth, inFlight int) {
	t.Helper()
	for _, tp := range testnode.Stats(t, hostport, topic) {
		for _, ch := range tp.Channels {
			if tp.Name == topic && ch.Name == channel {
				depth += ch.Depth
				inFlight += ch.InFlight
			}
		}
	}
	return depth, inFlight
}
