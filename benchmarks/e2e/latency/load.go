package main

import (
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"sync"
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

// interval is the time between two scheduled publishes.
func (c config) interval() time.Duration {
	return time.Duration(float64(time.Second) / c.rate)
}

// publish is one scheduled PUB: when the schedule wanted it sent and when
// the schedule got round to handing it out.
type publish struct {
	due, released time.Time
}

// connection is one producer and what came back on it.
type connection struct {
	producer *nsq.Producer
	answers  chan *nsq.ProducerTransaction

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

// collect records each answer's latency from the moment the schedule
// released its publish: a publish held up behind a blocked connection
// counts from then, so a slow server cannot hide its queueing.
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
			c.latencies = append(c.latencies, now.Sub(t.Args[0].(publish).released))
		}
		c.mu.Unlock()
	}
}

// send makes each publish it is given; several run per connection so a
// write held up by flow control does not hold up the ones behind it.
func (c *connection) send(topic string, body []byte, pubs <-chan publish) {
	for p := range pubs {
		err := c.producer.PublishAsync(topic, body, c.answers, p)
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

// answered is how many publishes have an answer or never went out.
func (c *connection) answered() (done, sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(len(c.latencies)) + c.pubErrors + c.sendErrors, c.sent
}

// schedule hands out publishes due at start+k×interval, up to end, to the
// connections in turn, and returns how late it released them. A ticker
// wakes it and every wakeup releases all that are due, so the rate holds
// however coarse the timer is (about 1ms here) and whatever the answers do.
func schedule(start, end time.Time, interval time.Duration, conns []chan publish) []time.Duration {
	defer func() {
		for _, c := range conns {
			close(c)
		}
	}()
	lags := make([]time.Duration, 0, int(end.Sub(start)/interval)+1)
	tick := time.NewTicker(max(interval, 100*time.Microsecond))
	defer tick.Stop()
	next := start
	for k := 0; next.Before(end); <-tick.C {
		for now := time.Now(); !next.After(now) && next.Before(end); k, next = k+1, next.Add(interval) {
			conns[k%len(conns)] <- publish{due: next, released: now}
			lags = append(lags, now.Sub(next))
		}
	}
	return lags
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
	pubs := make([]chan publish, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		pubs[i] = make(chan publish, 1024)
		for s := 0; s < cfg.senders; s++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.send(cfg.topic, body, pubs[i])
			}()
		}
	}
	start := time.Now()
	lags := schedule(start, start.Add(cfg.duration), cfg.interval(), pubs)
	wg.Wait()
	span := time.Since(start)

	deadline := time.Now().Add(cfg.drain)
	for !allAnswered(conns) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	r := gather(conns)
	r.span, r.lags = span, lags
	return r, nil
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
func gather(conns []*connection) result {
	var r result
	for _, c := range conns {
		c.mu.Lock()
		r.sent += c.sent
		r.errors += c.sendErrors + c.pubErrors
		r.latencies = append(r.latencies, c.latencies...)
		if r.firstError == nil {
			r.firstError = c.firstError
		}
		c.mu.Unlock()
	}
	r.acked = int64(len(r.latencies))
	r.unanswered = r.sent - r.acked - r.errors
	return r
}
