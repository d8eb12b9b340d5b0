package main

import (
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsqio/go-nsq"
)

type config struct {
	addr        string
	topic       string
	rate        float64 // messages per second, all connections together
	connections int
	senders     int // goroutines per connection
	duration    time.Duration
	size        int
	drain       time.Duration
}

func (c config) validate() error {
	switch {
	case c.addr == "":
		return errors.New("--nsqd-tcp-address is empty")
	case !nsq.IsValidTopicName(c.topic):
		return fmt.Errorf("--topic %q is not a valid topic name", c.topic)
	case math.IsNaN(c.rate) || c.rate <= 0 || math.IsInf(c.rate, 0):
		return fmt.Errorf("--rate %v must be a positive number of messages per second", c.rate)
	case c.connections < 1:
		return fmt.Errorf("--connections %d must be at least 1", c.connections)
	case c.senders < 1:
		return fmt.Errorf("--senders %d must be at least 1", c.senders)
	case c.duration <= 0:
		return fmt.Errorf("--duration %v must be positive", c.duration)
	case c.size < 1:
		return fmt.Errorf("--size %d must be at least 1", c.size)
	case c.drain < 0:
		return fmt.Errorf("--drain %v must not be negative", c.drain)
	}
	return nil
}

// interval is the time between two sends on one connection.
func (c config) interval() time.Duration {
	return time.Duration(float64(c.connections) / c.rate * float64(time.Second))
}

// connection is one producer and what came back on it.
type connection struct {
	producer *nsq.Producer
	answers  chan *nsq.ProducerTransaction
	lag      atomic.Int64 // most nanoseconds a publish started behind its schedule

	mu         sync.Mutex
	sent       int64
	sendErrors int64
	pubErrors  int64
	latencies  []time.Duration
	firstError error
}

func openConnection(cfg config) (*connection, error) {
	p, err := nsq.NewProducer(cfg.addr, nsq.NewConfig())
	if err != nil {
		return nil, err
	}
	p.SetLogger(log.New(os.Stderr, "", log.LstdFlags), nsq.LogLevelError)
	// Connect now, so the first scheduled publishes do not wait for it.
	if err := p.Ping(); err != nil {
		p.Stop()
		return nil, fmt.Errorf("connecting to %s: %w", cfg.addr, err)
	}
	expected := int(cfg.rate*cfg.duration.Seconds())/cfg.connections + 1
	return &connection{
		producer: p,
		// The producer's router goroutine blocks while this is full, and
		// with it every publish on the connection.
		answers:   make(chan *nsq.ProducerTransaction, 1<<16),
		latencies: make([]time.Duration, 0, expected),
	}, nil
}

// collect records each answer's latency from the publish's scheduled time,
// so time the client spent behind schedule counts too.
func (c *connection) collect() {
	for t := range c.answers {
		now := time.Now()
		c.mu.Lock()
		if t.Error != nil {
			c.pubErrors++
			if c.firstError == nil {
				c.firstError = t.Error
			}
		} else {
			c.latencies = append(c.latencies, now.Sub(t.Args[0].(time.Time)))
		}
		c.mu.Unlock()
	}
}

// send publishes once per scheduled time it is given.
func (c *connection) send(topic string, body []byte, due <-chan time.Time) {
	for at := range due {
		c.noteLag(time.Since(at))
		err := c.producer.PublishAsync(topic, body, c.answers, at)
		c.mu.Lock()
		c.sent++
		if err != nil {
			c.sendErrors++
			if c.firstError == nil {
				c.firstError = err
			}
		}
		c.mu.Unlock()
	}
}

func (c *connection) noteLag(lag time.Duration) {
	for {
		old := c.lag.Load()
		if int64(lag) <= old || c.lag.CompareAndSwap(old, int64(lag)) {
			return
		}
	}
}

// answered is how many publishes have an answer or never went out.
func (c *connection) answered() (done, sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.latencies)) + c.pubErrors + c.sendErrors, c.sent
}

// schedule hands out the connection's send times, start+offset+k×interval
// up to end, as they come due. A ticker wakes it; every tick hands out all
// that are due, so a late wakeup never lowers the rate.
func schedule(start, end time.Time, offset, interval time.Duration, due chan<- time.Time) {
	defer close(due)
	tick := time.NewTicker(max(interval, 100*time.Microsecond))
	defer tick.Stop()
	next := start.Add(offset)
	for next.Before(end) {
		for now := time.Now(); !next.After(now) && next.Before(end); next = next.Add(interval) {
			due <- next
		}
		if next.Before(end) {
			<-tick.C
		}
	}
}

// run publishes at cfg.rate for cfg.duration and gathers the answers.
func run(cfg config) (result, error) {
	conns := make([]*connection, 0, cfg.connections)
	defer func() {
		for _, c := range conns {
			c.producer.Stop()
			close(c.answers)
		}
	}()
	for i := 0; i < cfg.connections; i++ {
		c, err := openConnection(cfg)
		if err != nil {
			return result{}, err
		}
		conns = append(conns, c)
		go c.collect()
	}

	body := make([]byte, cfg.size)
	interval := cfg.interval()
	start := time.Now().Add(10 * time.Millisecond)
	end := start.Add(cfg.duration)
	var wg sync.WaitGroup
	for i, c := range conns {
		due := make(chan time.Time, 1024)
		// Connections take turns, so together they send evenly.
		offset := time.Duration(i) * interval / time.Duration(cfg.connections)
		go schedule(start, end, offset, interval, due)
		for s := 0; s < cfg.senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.send(cfg.topic, body, due)
			}()
		}
	}
	wg.Wait()
	span := time.Since(start)

	deadline := time.Now().Add(cfg.drain)
	for !allAnswered(conns) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	return gather(conns, span), nil
}

func allAnswered(conns []*connection) bool {
	for _, c := range conns {
		if done, sent := c.answered(); done < sent {
			return false
		}
	}
	return true
}

// gather merges the connections' figures as they are now; answers still
// on their way count as unanswered.
func gather(conns []*connection, span time.Duration) result {
	r := result{span: span}
	for _, c := range conns {
		c.mu.Lock()
		r.sent += c.sent
		r.errors += c.sendErrors + c.pubErrors
		r.latencies = append(r.latencies, c.latencies...)
		if r.firstError == nil {
			r.firstError = c.firstError
		}
		c.mu.Unlock()
		r.lag = max(r.lag, time.Duration(c.lag.Load()))
	}
	r.acked = int64(len(r.latencies))
	r.unanswered = r.sent - r.acked - r.errors
	return r
}
