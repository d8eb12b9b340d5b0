package main

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// runCommand runs natsbench with args and returns its exit status and
// standard output.
func runCommand(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status := run(args, &out, &errOut)
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return status, out.String()
}

// Slow acks must not slow the sends, and latency counts to the ack.
func TestLatencyIsOpenLoopAndTimedToThePubAck(t *testing.T) {
	const delay = 100 * time.Millisecond
	f := startFakeServer(t, delay)
	status, out := runCommand(t, "latency", "--server="+f.url(), "--rate=1000", "--connections=2",
		"--duration=300ms", "--drain=10s")
	if status != 0 {
		t.Fatalf("exit status %d:\n%s", status, out)
	}
	if !strings.Contains(out, "sent: 300 acked: 300 errors: 0 unanswered: 0") {
		t.Fatalf("want 300 sent and acked:\n%s", out)
	}
	if got := f.pubs.Load(); got != 300 {
		t.Fatalf("server got %d publishes, want 300", got)
	}
	m := regexp.MustCompile(`latency µs: p50 (\d+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no latency line:\n%s", out)
	}
	// A closed loop would also show p50 ≥ delay, but would have sent
	// only 2 × 300ms / 100ms publishes: the counts above rule it out.
	if p50, _ := strconv.Atoi(m[1]); p50 < int(delay/time.Microsecond) {
		t.Fatalf("p50 %d µs below the server's delay %v", p50, delay)
	}
	if _, ok := f.bodies.Load(200); !ok {
		t.Fatal("no 200-byte body arrived (--size defaults to 200)")
	}
}

func TestLatencyCountsRefusedPublishesAsErrors(t *testing.T) {
	f := startFakeServer(t, 0)
	f.refuse = true
	status, out := runCommand(t, "latency", "--server="+f.url(), "--rate=1000", "--connections=1", "--duration=50ms")
	if status != 1 || !strings.Contains(out, "sent: 50 acked: 0 errors: 50 unanswered: 0") ||
		!strings.Contains(out, "refused by the fake") {
		t.Fatalf("exit status %d, want 1 and 50 errors:\n%s", status, out)
	}
}

var throughputLine = regexp.MustCompile(`^duration: [^ ]* - [0-9.]*mb/s - ([0-9.]*)ops/s - [0-9.]*us/op\n$`)

// Each batch waits for all its acks before the next: with acks 20 ms late,
// a writer can finish at most runfor/20ms + 1 batches per connection.
func TestWriteWaitsForEveryAckOfABatch(t *testing.T) {
	const delay = 20 * time.Millisecond
	for _, batch := range []int{1, 5} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			f := startFakeServer(t, delay)
			status, out := runCommand(t, "write", "--server="+f.url(), "--runfor=200ms", "--connections=2",
				fmt.Sprint("--batch-size=", batch), "--size=10")
			if status != 0 {
				t.Fatalf("exit status %d:\n%s", status, out)
			}
			m := throughputLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("output is not bench_writer's line, which run.sh parses:\n%q", out)
			}
			d, _ := time.ParseDuration(strings.Fields(out)[1])
			rate, _ := strconv.ParseFloat(m[1], 64)
			written := int64(rate*d.Seconds() + 0.5)
			if got := f.pubs.Load(); written != got {
				t.Fatalf("reported %d messages (%s), server got %d: some counted without an ack", written, out, got)
			}
			if most := int64(2 * batch * (200/20 + 1)); written > most || written == 0 || written%int64(batch) != 0 {
				t.Fatalf("%d messages in 200ms, want whole batches and at most %d", written, most)
			}
			if _, ok := f.bodies.Load(10); !ok {
				t.Fatal("no 10-byte body arrived")
			}
		})
	}
}

func TestWriteFailsOnARefusedPublish(t *testing.T) {
	for _, batch := range []string{"1", "200"} {
		f := startFakeServer(t, 0)
		f.refuse = true
		if status, out := runCommand(t, "write", "--server="+f.url(), "--runfor=1s", "--batch-size="+batch); status != 1 {
			t.Fatalf("batch %s: exit status %d, want 1:\n%s", batch, status, out)
		}
	}
}

func TestBadCommandLinesAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"publish"},
		{"latency", "--rate=0"},
		{"latency", "--stream=a.b"},
		{"latency", "--server="},
		{"latency", "extra"},
		{"write", "--batch-size=0"},
		{"write", "--runfor=0s"},
		{"write", "--connections=0"},
		{"read", "--max-messages=0"},
		{"read", "--consumer=has space"},
		{"setup", "--servers=,"},
		{"setup", "--replicas=0"},
		{"setup", "--timeout=0s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if status := run(args, io.Discard, io.Discard); status != 2 {
				t.Fatalf("exit status %d, want 2", status)
			}
		})
	}
	if status := run([]string{"write", "-h"}, io.Discard, io.Discard); status != 0 {
		t.Fatalf("-h: exit status %d, want 0", status)
	}
}

func TestReadyLeaderWaitsForEveryFollower(t *testing.T) {
	peer := func(name string, current bool) *jetstream.PeerInfo {
		return &jetstream.PeerInfo{Name: name, Current: current}
	}
	for _, tc := range []struct {
		name    string
		cluster *jetstream.ClusterInfo
		want    string
	}{
		{"no cluster info", nil, ""},
		{"no leader", &jetstream.ClusterInfo{Replicas: []*jetstream.PeerInfo{peer("n2", true), peer("n3", true)}}, ""},
		{"a follower missing", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true)}}, ""},
		{"a follower behind", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true), peer("n3", false)}}, ""},
		{"ready", &jetstream.ClusterInfo{Leader: "n1", Replicas: []*jetstream.PeerInfo{peer("n2", true), peer("n3", true)}}, "n1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readyLeader(tc.cluster, 3)
			if got != tc.want || (err == nil) != (tc.want != "") {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
