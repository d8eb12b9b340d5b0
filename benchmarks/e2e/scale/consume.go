package main

import (
	"fmt"
	"sync/atomic"

	"github.com/nsqio/go-nsq"
)

// consumeChannel is the channel --consume subscribes to on every topic.
const consumeChannel = "scale"

// consumers keep a go-nsq Consumer on every topic, connected to every
// node, FINning each message as it comes: the channel work, FINs and
// channel positions saved that a spread load brings when its consumers
// keep up. A Partita node delivers a topic's messages from the partitions
// it leads, so each Consumer holds one connection to each node.
type consumers struct {
	all      []*nsq.Consumer
	finished atomic.Int64
}

// startConsumers subscribes to consumeChannel on every topic through
// every node; maxInFlight is each Consumer's, shared over its connections.
func startConsumers(c *cluster, topics []topic, maxInFlight int) (*consumers, error) {
	cs := &consumers{}
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.tcp
	}
	for _, t := range topics {
		cfg := nsq.NewConfig()
		cfg.MaxInFlight = maxInFlight
		con, err := nsq.NewConsumer(t.name, consumeChannel, cfg)
		if err != nil {
			cs.stop()
			return nil, err
		}
		con.SetLogger(nil, nsq.LogLevelError)
		con.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error {
			cs.finished.Add(1)
			return nil
		}))
		cs.all = append(cs.all, con)
		if err := con.ConnectToNSQDs(addrs); err != nil {
			cs.stop()
			return nil, fmt.Errorf("subscribing to %s: %w", t.name, err)
		}
	}
	return cs, nil
}

// stop closes every Consumer and waits for them to end.
func (cs *consumers) stop() {
	for _, con := range cs.all {
		con.Stop()
	}
	for _, con := range cs.all {
		<-con.StopChan
	}
}
