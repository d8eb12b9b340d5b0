package node_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// As in nsqd, an ephemeral channel goes away with its last consumer, and an
// ephemeral topic with its last channel; a normal channel stays.
func TestEphemeralTopicsAndChannels(t *testing.T) {
	n := testnode.Start(t)
	subscribe := func(topic, channel string) *nsq.Consumer {
		c, err := nsq.NewConsumer(topic, channel, nsq.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		c.SetLoggerLevel(nsq.LogLevelError)
		c.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error { return nil }))
		if err := c.ConnectToNSQD(n.TCPAddr()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	stats := func() string {
		_, body := n.Get(t, "/stats?format=json")
		return body
	}
	durable := subscribe("events", "keep")
	eph := subscribe("events", "tmp#ephemeral")
	second := subscribe("events", "tmp#ephemeral")
	eph2 := subscribe("live#ephemeral", "watch#ephemeral")
	testnode.Eventually(t, 5*time.Second, "channels in stats", func() bool {
		s := stats()
		return strings.Contains(s, `"tmp#ephemeral"`) && strings.Contains(s, `"live#ephemeral"`)
	})

	eph.Stop()
	<-eph.StopChan
	if !strings.Contains(stats(), `"tmp#ephemeral"`) {
		t.Fatal("ephemeral channel removed while it still has a consumer")
	}
	second.Stop()
	<-second.StopChan
	testnode.Eventually(t, 15*time.Second, "ephemeral channel removed", func() bool { return !strings.Contains(stats(), `"tmp#ephemeral"`) })

	eph2.Stop()
	<-eph2.StopChan
	testnode.Eventually(t, 15*time.Second, "ephemeral topic removed", func() bool { return !strings.Contains(stats(), `"live#ephemeral"`) })

	durable.Stop()
	<-durable.StopChan
	if !strings.Contains(stats(), `"keep"`) {
		t.Fatal("a normal channel went away with its consumer")
	}
}
