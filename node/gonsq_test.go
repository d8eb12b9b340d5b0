package node_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// collector gathers bodies a go-nsq consumer receives.
type collector struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *collector) HandleMessage(m *nsq.Message) error {
	c.mu.Lock()
	c.seen[string(m.Body)]++
	c.mu.Unlock()
	return nil
}

func (c *collector) has(bodies []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range bodies {
		if c.seen[b] == 0 {
			return false
		}
	}
	return true
}

// Every body published with go-nsq's Publish, MultiPublish and
// DeferredPublish arrives at consumers connected directly and through the
// node's nsqlookupd API, on a partitioned topic.
func TestGoNSQPublishAndConsume(t *testing.T) {
	n := testnode.Start(t, "--default-partitions", "3")
	// Both channels exist before the first publish: a channel created later
	// starts at the end of the log, as in nsqd.
	for _, path := range []string{"/topic/create?topic=gonsq", "/channel/create?topic=gonsq&channel=via-nsqd", "/channel/create?topic=gonsq&channel=via-lookupd"} {
		if code, body := n.Post(t, path, ""); code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	prod, err := nsq.NewProducer(n.TCPAddr(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	defer prod.Stop()

	var want []string
	for i := 0; i < 50; i++ {
		b := fmt.Sprintf("pub-%d", i)
		want = append(want, b)
		if err := prod.Publish("gonsq", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	var batch [][]byte
	for i := 0; i < 50; i++ {
		b := fmt.Sprintf("mpub-%d", i)
		want = append(want, b)
		batch = append(batch, []byte(b))
	}
	if err := prod.MultiPublish("gonsq", batch); err != nil {
		t.Fatal(err)
	}
	if err := prod.DeferredPublish("gonsq", 200*time.Millisecond, []byte("deferred")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "deferred")

	for _, via := range []string{"nsqd", "lookupd"} {
		t.Run(via, func(t *testing.T) {
			cfg := nsq.NewConfig()
			cfg.MaxInFlight = 16
			cfg.LookupdPollInterval = time.Second
			c, err := nsq.NewConsumer("gonsq", "via-"+via, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c.SetLoggerLevel(nsq.LogLevelError)
			col := &collector{seen: map[string]int{}}
			c.AddHandler(col)
			if via == "nsqd" {
				err = c.ConnectToNSQD(n.TCPAddr())
			} else {
				err = c.ConnectToNSQLookupd(n.HTTPAddr())
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { c.Stop(); <-c.StopChan }()
			testnode.Eventually(t, 10*time.Second, "every body via "+via, func() bool { return col.has(want) })
		})
	}
}
