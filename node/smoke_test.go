package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

func TestSmokeGoNSQ(t *testing.T) {
	n := testnode.Start(t)
	p, err := nsq.NewProducer(n.TCPAddr(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	p.SetLoggerLevel(nsq.LogLevelError)
	for i := 0; i < 100; i++ {
		if err := p.Publish("smoke", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.MultiPublish("smoke", [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 200)
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 10
	c, _ := nsq.NewConsumer("smoke", "ch", cfg)
	c.SetLoggerLevel(nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error { got <- string(m.Body); return nil }))
	if err := c.ConnectToNSQLookupd(n.HTTPAddr()); err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	for i := 0; i < 102; i++ {
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d", i)
		}
	}
}
