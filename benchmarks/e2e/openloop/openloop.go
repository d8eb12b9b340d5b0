// Package openloop publishes at a fixed rate whatever the answers do, so a
// slow answer shows up as latency instead of quietly lowering the rate, as
// it would in a closed loop like bench_writer's. The client library is
// behind Publisher, so every system is driven by the same schedule and
// measured the same way.
package openloop

import (
	"flag"
	"fmt"
	"math"
	"sync"
	"time"
)

// Config is the load: how fast, over how many connections, for how long.
type Config struct {
	Rate        float64 // messages per second, all connections together
	Connections int
	Senders     int // goroutines per connection
	Duration    time.Duration
	Size        int
	Drain       time.Duration
}

// AddFlags registers the load's flags with their defaults.
func (c *Config) AddFlags(fs *flag.FlagSet) {
	fs.Float64Var(&c.Rate, "rate", 10000, "messages per second over all connections")
	fs.IntVar(&c.Connections, "connections", 8, "producer connections")
	fs.IntVar(&c.Senders, "senders", 4, "goroutines publishing on each connection, so one blocked write does not hold the schedule back")
	fs.DurationVar(&c.Duration, "duration", 10*time.Second, "how long to publish")
	fs.IntVar(&c.Size, "size", 200, "message body size in bytes")
	fs.DurationVar(&c.Drain, "drain", 10*time.Second, "how long to wait for answers after the last publish")
}

func (c Config) Validate() error {
	switch {
	case math.IsNaN(c.Rate) || c.Rate <= 0 || math.IsInf(c.Rate, 0):
		return fmt.Errorf("--rate %v must be a positive number of messages per second", c.Rate)
	case c.Connections < 1:
		return fmt.Errorf("--connections %d must be at least 1", c.Connections)
	case c.Senders < 1:
		return fmt.Errorf("--senders %d must be at least 1", c.Senders)
	case c.Duration <= 0:
		return fmt.Errorf("--duration %v must be positive", c.Duration)
	case c.Size < 1:
		return fmt.Errorf("--size %d must be at least 1", c.Size)
	case c.Drain < 0:
		return fmt.Errorf("--drain %v must not be negative", c.Drain)
	}
	return nil
}

// interval is the time between two scheduled publishes.
func (c Config) interval() time.Duration {
	return time.Duration(float64(time.Second) / c.Rate)
}

// Release is one scheduled publish: when the schedule wanted it sent and
// when the schedule got round to handing it out.
type Release struct {
	Due, Released time.Time
}

// Publisher is one connection of a client library.
type Publisher interface {
	// Publish sends body without waiting for the server's answer, and
	// reports that answer to the Tally the publisher was opened with,
	// passing r back.
	Publish(body []byte, r Release) error
	Close()
}

// Tally is what came back on one connection.
type Tally struct {
	mu         sync.Mutex
	sent       int64
	sendErrors int64
	pubErrors  int64
	latencies  []time.Duration
	firstError error
}

// Answer records the server's answer to the publish released at r; its
// latency counts from the release, so a publish held up behind a blocked
// connection counts from then and a slow server cannot hide its queueing.
func (t *Tally) Answer(r Release, err error) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.pubErrors++
		t.noteError(err)
		return
	}
	t.latencies = append(t.latencies, now.Sub(r.Released))
}

func (t *Tally) recordSend(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent++
	if err != nil {
		t.sendErrors++
		t.noteError(err)
	}
}

func (t *Tally) noteError(err error) {
	if t.firstError == nil {
		t.firstError = err
	}
}

// answered is how many publishes have an answer or never went out.
func (t *Tally) answered() (done, sent int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int64(len(t.latencies)) + t.pubErrors + t.sendErrors, t.sent
}

// Opener opens one connection that reports its answers to t.
type Opener func(t *Tally) (Publisher, error)

type connection struct {
	pub   Publisher
	tally *Tally
}

// Run publishes size-byte messages at cfg.Rate for cfg.Duration over
// cfg.Connections connections made by open, and gathers the answers.
func Run(cfg Config, open Opener) (Result, error) {
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	conns := make([]connection, 0, cfg.Connections)
	defer func() {
		for _, c := range conns {
			c.pub.Close()
		}
	}()
	expected := int(cfg.Rate*cfg.Duration.Seconds())/cfg.Connections + 1
	for range cfg.Connections {
		t := &Tally{latencies: make([]time.Duration, 0, expected)}
		p, err := open(t)
		if err != nil {
			return Result{}, err
		}
		conns = append(conns, connection{pub: p, tally: t})
	}

	body := make([]byte, cfg.Size)
	releases := make([]chan Release, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		releases[i] = make(chan Release, 1024)
		// Several senders per connection, so a write held up by flow
		// control does not hold up the ones behind it.
		for range cfg.Senders {
			wg.Go(func() {
				for r := range releases[i] {
					c.tally.recordSend(c.pub.Publish(body, r))
				}
			})
		}
	}
	start := time.Now()
	lags := schedule(start, start.Add(cfg.Duration), cfg.interval(), releases)
	wg.Wait()
	span := time.Since(start)

	deadline := time.Now().Add(cfg.Drain)
	for !allAnswered(conns) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	r := gather(conns)
	r.Span, r.Lags = span, lags
	return r, nil
}

// schedule hands out publishes due at start+k×interval, up to end, to the
// connections in turn, and returns how late it released them. A ticker
// wakes it and every wakeup releases all that are due, so the rate holds
// however coarse the timer is (about 1ms here) and whatever the answers do.
func schedule(start, end time.Time, interval time.Duration, conns []chan Release) []time.Duration {
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
			conns[k%len(conns)] <- Release{Due: next, Released: now}
			lags = append(lags, now.Sub(next))
		}
	}
	return lags
}

func allAnswered(conns []connection) bool {
	for _, c := range conns {
		if done, sent := c.tally.answered(); done < sent {
			return false
		}
	}
	return true
}

// gather merges the connections' figures as they are now; answers still
// on their way count as unanswered.
func gather(conns []connection) Result {
	var r Result
	for _, c := range conns {
		t := c.tally
		t.mu.Lock()
		r.Sent += t.sent
		r.Errors += t.sendErrors + t.pubErrors
		r.Latencies = append(r.Latencies, t.latencies...)
		if r.FirstError == nil {
			r.FirstError = t.firstError
		}
		t.mu.Unlock()
	}
	r.Acked = int64(len(r.Latencies))
	r.Unanswered = r.Sent - r.Acked - r.Errors
	return r
}
