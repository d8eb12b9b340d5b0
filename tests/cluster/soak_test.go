package cluster

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// processSample is what a node's /metrics says about its own resources.
type processSample struct {
	Goroutines, OpenFDs int
	RSS                 int64
}

func (s processSample) String() string {
	return fmt.Sprintf("%d goroutines, %d open fds, %.1f MiB resident", s.Goroutines, s.OpenFDs, float64(s.RSS)/(1<<20))
}

func sampleProcess(t *testing.T, hostport string) processSample {
	t.Helper()
	m := scrapeSums(t, hostport, []string{"go_goroutines", "process_open_fds", "process_resident_memory_bytes"})
	s := processSample{Goroutines: int(m["go_goroutines"]), OpenFDs: int(m["process_open_fds"]), RSS: int64(m["process_resident_memory_bytes"])}
	if s.Goroutines == 0 || s.OpenFDs == 0 || s.RSS == 0 {
		t.Fatalf("/metrics lacks go_goroutines, process_open_fds or process_resident_memory_bytes: %+v", s)
	}
	return s
}

// Growth a soak may leave behind once its clients are gone: a few
// goroutines and fds of lazily started machinery, and the memory Go keeps
// from the heap's peak. Leaks per connection, topic channel or message
// grow with the soak's length and pass these after minutes.
const (
	soakMaxGoroutines = 20
	soakMaxFDs        = 10
	soakMaxRSS        = 64 << 20
)

func soakDuration(t *testing.T) time.Duration {
	return envDuration(t, "PARTITA_SOAK_DURATION", 30*time.Second)
}

// envDuration is the duration the environment variable name gives, or def
// when it is unset: how long runs lengthen a test's phase.
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// A bounded soak of one node: producers and consumers that connect, work
// briefly and leave (PUB, MPUB, HTTP pub; durable and ephemeral channels)
// for PARTITA_SOAK_DURATION (30 s by default). Sampled from /metrics after
// a warm-up and again once the clients are gone, the node's goroutines,
// open fds and resident memory grow by less than the bounds above. An hour
// (docs/faults.md, "Soak"):
//
//	PARTITA_SOAK_DURATION=1h go test ./tests/cluster/ -run 'TestSoak$' -v -timeout 2h
func TestSoak(t *testing.T) {
	duration := soakDuration(t)
	c := startCluster(t, 1)
	n := c.nodes["n1"]
	topics := []string{"soak0", "soak1", "soak2", "soak3"}
	for _, tp := range topics {
		testnode.Post(t, n.HTTP, "/topic/create?topic="+tp, "")
	}
	var published, consumed, connections countAll
	churn := func(d time.Duration) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(2)
			go func() { defer wg.Done(); soakProducer(n, topics, w, stop, &published, &connections) }()
			go func() { defer wg.Done(); soakConsumer(n, topics, w, stop, &consumed, &connections) }()
		}
		<-time.After(d) // the soak's length: a schedule, not a wait
		close(stop)
		wg.Wait()
	}
	churn(5 * time.Second)
	base := settledSample(t, n.HTTP, processSample{Goroutines: 1 << 30})
	t.Logf("after warm-up: %v", base)
	start := time.Now()
	churn(duration)
	took := time.Since(start)
	end := settledSample(t, n.HTTP, base)
	t.Logf("after %v of churn (%d client connections, %d published, %d consumed): %v",
		took.Round(time.Second), connections.get(), published.get(), consumed.get(), end)
	if end.Goroutines > base.Goroutines+soakMaxGoroutines || end.OpenFDs > base.OpenFDs+soakMaxFDs || end.RSS > base.RSS+soakMaxRSS {
		t.Fatalf("grew beyond +%d goroutines, +%d fds, +%d MiB: %v, then %v",
			soakMaxGoroutines, soakMaxFDs, soakMaxRSS>>20, base, end)
	}
	if published.get() == 0 || consumed.get() == 0 {
		t.Fatalf("the soak did nothing: %d published, %d consumed", published.get(), consumed.get())
	}
}

// settledSample waits until the node's goroutines are back within the
// bound over base (connections close asynchronously), then samples.
func settledSample(t *testing.T, hostport string, base processSample) processSample {
	t.Helper()
	var s processSample
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = sampleProcess(t, hostport)
		if s.Goroutines <= base.Goroutines+soakMaxGoroutines && s.OpenFDs <= base.OpenFDs+soakMaxFDs || time.Now().After(deadline) {
			return s
		}
		<-time.After(200 * time.Millisecond)
	}
}

type countAll struct {
	mu sync.Mutex
	n  int
}

func (c *countAll) add(k int) { c.mu.Lock(); c.n += k; c.mu.Unlock() }
func (c *countAll) get() int  { c.mu.Lock(); defer c.mu.Unlock(); return c.n }

// soakProducer connects, publishes a little by PUB, MPUB and HTTP, and
// disconnects, over and over until stop.
func soakProducer(n *testnode.Process, topics []string, w int, stop <-chan struct{}, published, connections *countAll) {
	for i := 0; !stopping(stop); i++ {
		topic := topics[(w+i)%len(topics)]
		p, err := nsq.NewProducer(n.TCP, nsq.NewConfig())
		if err != nil {
			panic(err)
		}
		p.SetLogger(quietLogger, nsq.LogLevelError)
		connections.add(1)
		for k := 0; k < 20; k++ {
			if p.Publish(topic, []byte(fmt.Sprintf("%d-%d-%d", w, i, k))) == nil {
				published.add(1)
			}
		}
		if p.MultiPublish(topic, [][]byte{[]byte("a"), []byte("b"), []byte("c")}) == nil {
			published.add(3)
		}
		p.Stop()
		resp, err := http.Post("http://"+n.HTTP+"/pub?topic="+topic, "text/plain", strings.NewReader("http"))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				published.add(1)
			}
		}
	}
}

// soakConsumer subscribes to a durable or an ephemeral channel, takes some
// messages and leaves, over and over until stop.
func soakConsumer(n *testnode.Process, topics []string, w int, stop <-chan struct{}, consumed, connections *countAll) {
	for i := 0; !stopping(stop); i++ {
		topic := topics[(w+i)%len(topics)]
		channel := "durable"
		if i%2 == 1 {
			channel = fmt.Sprintf("c%d#ephemeral", w)
		}
		cfg := nsq.NewConfig()
		cfg.MaxInFlight = 10
		cons, err := nsq.NewConsumer(topic, channel, cfg)
		if err != nil {
			panic(err)
		}
		cons.SetLogger(quietLogger, nsq.LogLevelError)
		got := make(chan struct{}, 1000)
		cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
			consumed.add(1)
			got <- struct{}{}
			return nil
		}))
		connections.add(1)
		if cons.ConnectToNSQD(n.TCP) == nil {
			// Leave after 30 messages or 300 ms, whichever comes first.
			timeout := time.After(300 * time.Millisecond)
		take:
			for k := 0; k < 30; k++ {
				select {
				case <-got:
				case <-timeout:
					break take
				case <-stop:
					break take
				}
			}
		}
		cons.Stop()
		<-cons.StopChan
	}
}

// A replica that lags holds the partition's writes; publishes beyond
// --write-window records in flight and --max-pub-waiting messages queued
// are refused at once with E_PUB_TOO_MUCH_WAITING instead of piling up in
// the leader, and writes flow again once the replica is back or dropped.
func TestLaggingReplicaRefusesPublishesBeyondTheQueue(t *testing.T) {
	c := startCluster(t, 3, "--write-window", "1", "--max-pub-waiting", "2")
	st := c.createTopic("lag", 3)
	leader := c.nodes[st.Leader]
	var producers []*nsq.Producer
	for range 20 {
		p := producer(t, leader.TCP)
		p.SetLogger(quietLogger, nsq.LogLevelError) // it would log every refusal
		if err := p.Ping(); err != nil {
			t.Fatal(err)
		}
		producers = append(producers, p)
	}
	if err := producers[0].Publish("lag", []byte("before")); err != nil {
		t.Fatal(err)
	}
	follower := c.nodes[c.followers(st)[0]]
	follower.Cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { follower.Cmd.Process.Signal(syscall.SIGCONT) })

	errs := make([]error, len(producers))
	var mu sync.Mutex
	answered := 0
	for i, p := range producers {
		go func() {
			err := p.Publish("lag", []byte(fmt.Sprint(i)))
			mu.Lock()
			errs[i] = err
			answered++
			mu.Unlock()
		}()
	}
	// Accepted publishes are answered once the stopped replica leaves the
	// ISR (--isr-shrink-after): none may wait for a later publish.
	testnode.Eventually(t, 20*time.Second, "every publish answered", func() bool { mu.Lock(); defer mu.Unlock(); return answered == len(producers) })
	mu.Lock()
	defer mu.Unlock()
	refused, ok := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case strings.Contains(err.Error(), "E_PUB_TOO_MUCH_WAITING"):
			refused++
		default:
			t.Errorf("publish failed with %v, want OK or E_PUB_TOO_MUCH_WAITING", err)
		}
	}
	t.Logf("with a replica stopped: %d publishes acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING", ok, refused)
	if refused == 0 {
		t.Fatal("no publish was refused while the replica lagged")
	}
	follower.Cmd.Process.Signal(syscall.SIGCONT)
	if err := producers[0].Publish("lag", []byte("after")); err != nil {
		t.Fatalf("publishing after the replica came back: %v", err)
	}
}
