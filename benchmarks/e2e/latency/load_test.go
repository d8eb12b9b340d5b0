package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNSQD speaks just enough of the NSQ protocol for a producer: it
// answers IDENTIFY with OK at once and every PUB with OK after delay, in
// order, as nsqd does.
type fakeNSQD struct {
	ln    net.Listener
	delay time.Duration
	pubs  atomic.Int64
	wg    sync.WaitGroup
}

func startFakeNSQD(t *testing.T, delay time.Duration) *fakeNSQD {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNSQD{ln: ln, delay: delay}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeNSQD) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			f.serve(c)
		}()
	}
}

func (f *fakeNSQD) serve(c net.Conn) {
	r := bufio.NewReader(c)
	if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
		return
	}
	answers := make(chan time.Time, 1<<16) // when each OK is due, in order
	defer close(answers)
	go func() {
		for due := range answers {
			time.Sleep(time.Until(due)) // the simulated server's work, not synchronisation
			if _, err := c.Write([]byte{0, 0, 0, 6, 0, 0, 0, 0, 'O', 'K'}); err != nil {
				return
			}
		}
	}()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		switch cmd := strings.Fields(line); {
		case len(cmd) == 0:
			return
		case cmd[0] == "NOP":
		case cmd[0] == "IDENTIFY" || cmd[0] == "PUB":
			var size uint32
			if binary.Read(r, binary.BigEndian, &size) != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, r, int64(size)); err != nil {
				return
			}
			due := time.Now()
			if cmd[0] == "PUB" {
				f.pubs.Add(1)
				due = due.Add(f.delay)
			}
			answers <- due
		default:
			return
		}
	}
}

// Slow answers must not slow the sends: that is what makes it open loop.
// A closed loop of one publisher per connection would manage only
// 2 × 500ms / 200ms = 5 publishes here.
func TestSendsKeepTheirScheduleWhenAnswersAreSlow(t *testing.T) {
	const delay = 200 * time.Millisecond
	f := startFakeNSQD(t, delay)
	cfg := config{addr: f.ln.Addr().String(), topic: "t", rate: 1000, connections: 2, senders: 1,
		duration: 500 * time.Millisecond, size: 10, drain: 10 * time.Second}
	res, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.sent != 500 || res.acked != 500 || res.errors != 0 || res.unanswered != 0 {
		t.Fatalf("sent %d acked %d errors %d unanswered %d, want 500 sent and acked (first error %v)",
			res.sent, res.acked, res.errors, res.unanswered, res.firstError)
	}
	if got := f.pubs.Load(); got != 500 {
		t.Fatalf("server got %d PUBs, want 500", got)
	}
	if res.span > 500*time.Millisecond+delay {
		t.Fatalf("500 publishes took %v: sends waited for answers", res.span)
	}
	for _, l := range res.latencies {
		if l < delay {
			t.Fatalf("latency %v below the server's delay %v", l, delay)
		}
	}
	var out bytes.Buffer
	res.print(&out, cfg)
	if !strings.Contains(out.String(), "sent: 500 acked: 500 errors: 0 unanswered: 0") ||
		!strings.Contains(out.String(), "latency µs: p50 ") {
		t.Fatalf("report lacks the counts or the latency line:\n%s", out.String())
	}
}

func TestUnreachableServerIsAnError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = run(config{addr: addr, topic: "t", rate: 10, connections: 1, senders: 1, duration: time.Second, size: 1})
	if err == nil {
		t.Fatal("run against a closed port succeeded")
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Microsecond
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 99.9, 7},
		{hundred, 50, 50 * time.Microsecond},
		{hundred, 90, 90 * time.Microsecond},
		{hundred, 99, 99 * time.Microsecond},
		{hundred, 99.9, 100 * time.Microsecond},
		{hundred, 100, 100 * time.Microsecond},
		{hundred, 0.5, 1 * time.Microsecond},
	} {
		t.Run(fmt.Sprintf("n=%d/p=%v", len(tc.sorted), tc.p), func(t *testing.T) {
			if got := percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBadFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"--rate=0"},
		{"--rate=-5"},
		{"--rate=NaN"},
		{"--connections=0"},
		{"--senders=0"},
		{"--duration=0s"},
		{"--size=0"},
		{"--topic=has space"},
		{"--nsqd-tcp-address="},
		{"--drain=-1s"},
		{"--rate=fast"},
		{"extra"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if _, err := parseFlags(args, io.Discard); err == nil {
				t.Fatalf("%v accepted", args)
			}
		})
	}
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rate != 10000 || cfg.connections != 8 || cfg.duration != 10*time.Second || cfg.size != 200 {
		t.Fatalf("defaults %+v", cfg)
	}
}
