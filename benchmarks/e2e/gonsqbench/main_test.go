package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/nsq/nsqd"
)

// startNSQD runs nsqd v1.3.0 in the test, on loopback, every message
// through its disk queue as run.sh runs it.
func startNSQD(t *testing.T) string {
	t.Helper()
	opts := nsqd.NewOptions()
	opts.TCPAddress, opts.HTTPAddress, opts.HTTPSAddress = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	opts.DataPath = t.TempDir()
	opts.MemQueueSize = 0
	opts.LogLevel = 4 // fatal only
	n, err := nsqd.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	go n.Main()
	t.Cleanup(n.Exit)
	return n.RealTCPAddr().String()
}

// ops reads the rate and duration of the bench tools' last line.
func ops(t *testing.T, out string) (rate float64, took time.Duration) {
	t.Helper()
	var d string
	var mb float64
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "duration: %s - %fmb/s - %fops/s", &d, &mb, &rate); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	took, err := time.ParseDuration(d)
	if err != nil {
		t.Fatal(err)
	}
	return rate, took
}

// What pub published, read consumes: the two runs' counts agree once the
// reader has had time to drain.
func TestPublishedMessagesAreRead(t *testing.T) {
	addr := startNSQD(t)
	var pub, read bytes.Buffer
	if err := run([]string{"pub", "--nsqd-tcp-address=" + addr, "--topic=t", "--runfor=300ms", "--size=100"}, &pub); err != nil {
		t.Fatal(err)
	}
	rate, took := ops(t, pub.String())
	published := int64(rate*took.Seconds() + 0.5)
	if published == 0 || took < 300*time.Millisecond {
		t.Fatalf("published %d in %v", published, took)
	}
	if err := run([]string{"read", "--nsqd-tcp-address=" + addr, "--topic=t", "--channel=c", "--runfor=2s"}, &read); err != nil {
		t.Fatal(err)
	}
	rate, took = ops(t, read.String())
	if got := int64(rate*took.Seconds() + 0.5); got != published {
		t.Fatalf("read %d messages, %d were published", got, published)
	}
}

func TestBadArgumentsAreRefused(t *testing.T) {
	for _, args := range [][]string{nil, {"write"}, {"pub", "--size=0"}, {"read", "--runfor=-1s"}, {"pub", "--nope"}} {
		if err := run(args, os.Stdout); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// An unreachable server fails the run instead of reporting nothing done.
func TestUnreachableServerIsAnError(t *testing.T) {
	if err := run([]string{"pub", "--nsqd-tcp-address=127.0.0.1:1", "--runfor=100ms"}, os.Stdout); err == nil {
		t.Fatal("publishing to a closed port succeeded")
	}
}
