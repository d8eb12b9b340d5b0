package main

import (
	"bytes"
	"testing"
	"time"
)

func TestTmpZeroDelay(t *testing.T) {
	f := startFakeNSQD(t, 0)
	for _, senders := range []int{1, 4} {
		cfg := config{addr: f.ln.Addr().String(), topic: "t", rate: 10000, connections: 8, senders: senders, duration: 3 * time.Second, size: 200, drain: 10 * time.Second}
		res, err := run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		res.print(&out, cfg)
		t.Log(out.String())
	}
}
