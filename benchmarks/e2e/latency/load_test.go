package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/benchmarks/e2e/openloop"
	"github.com/partitamq/partita/benchmarks/e2e/testserver"
)

// fakeNSQD speaks just enough of the NSQ protocol for a producer: it
// answers IDENTIFY with OK at once and every PUB with OK after delay, in
// order, as nsqd does.
type fakeNSQD struct {
	addr  string
	delay time.Duration
	pubs  atomic.Int64
}

func startFakeNSQD(t *testing.T, delay time.Duration) *fakeNSQD {
	f := &fakeNSQD{delay: delay}
	f.addr = testserver.Start(t, f.serve)
	return f
}

func (f *fakeNSQD) serve(c net.Conn) {
	r := bufio.NewReader(c)
	if _, err := io.ReadFull(r, make([]byte, 4)); err != nil {
		return
	}
	answers := testserver.NewAnswers(c)
	defer answers.Close()
	ok := []byte{0, 0, 0, 6, 0, 0, 0, 0, 'O', 'K'}
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
			var delay time.Duration
			if cmd[0] == "PUB" {
				f.pubs.Add(1)
				delay = f.delay
			}
			answers.After(delay, ok)
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
	cfg := config{addr: f.addr, topic: "t", load: openloop.Config{Rate: 1000, Connections: 2,
		Senders: 1, Duration: 500 * time.Millisecond, Size: 10, Drain: 10 * time.Second}}
	res, err := run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != 500 || res.Acked != 500 || res.Errors != 0 || res.Unanswered != 0 {
		t.Fatalf("sent %d acked %d errors %d unanswered %d, want 500 sent and acked (first error %v)",
			res.Sent, res.Acked, res.Errors, res.Unanswered, res.FirstError)
	}
	if got := f.pubs.Load(); got != 500 {
		t.Fatalf("server got %d PUBs, want 500", got)
	}
	if res.Span > 500*time.Millisecond+delay {
		t.Fatalf("500 publishes took %v: sends waited for answers", res.Span)
	}
	for _, l := range res.Latencies {
		if l < delay {
			t.Fatalf("latency %v below the server's delay %v", l, delay)
		}
	}
	var out bytes.Buffer
	res.Print(&out, cfg.load)
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
	_, err = run(config{addr: addr, topic: "t", load: openloop.Config{Rate: 10, Connections: 1, Senders: 1,
		Duration: time.Second, Size: 1}})
	if err == nil {
		t.Fatal("run against a closed port succeeded")
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
	if l := cfg.load; l.Rate != 10000 || l.Connections != 8 || l.Senders != 4 || l.Duration != 10*time.Second ||
		l.Size != 200 || l.Drain != 10*time.Second {
		t.Fatalf("defaults %+v", cfg)
	}
}
