package testnode

import (
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
)

// ConsumerConfig is go-nsq's default with 200 messages in flight, so a
// test's consumer drains thousands of messages in seconds.
func ConsumerConfig() *nsq.Config {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 200
	return cfg
}

// Consume reads from topic/channel on the node at addr until enough() holds
// or within passes, calling seen for every delivery; seen and enough are
// never called at once.
func Consume(t testing.TB, addr, topic, channel string, within time.Duration, seen func(body string), enough func() bool) {
	t.Helper()
	c, err := nsq.NewConsumer(topic, channel, ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetLoggerLevel(nsq.LogLevelError)
	var mu sync.Mutex
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		seen(string(m.Body))
		mu.Unlock()
		return nil
	}))
	if err := c.ConnectToNSQD(addr); err != nil {
		t.Fatal(err)
	}
	Eventually(t, within, "consumer to catch up", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return enough()
	})
	c.Stop()
	<-c.StopChan
}
