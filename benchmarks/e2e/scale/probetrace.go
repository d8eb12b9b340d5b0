package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"
)

// probeTrace writes each failover probe answer on a line of its own, so
// that what an answer waited behind on its connection can be read back.
type probeTrace struct {
	mu sync.Mutex
	f  *os.File
	w  *bufio.Writer
}

func newProbeTrace(path string) *probeTrace {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe trace:", err)
		return nil
	}
	return &probeTrace{f: f, w: bufio.NewWriter(f)}
}

func (t *probeTrace) note(via int, pc *pubConn, p *partition, sent, answered time.Duration, text string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	fmt.Fprintf(t.w, "%d %p %s/%d %.4f %.4f %q\n", via, pc, p.topic, p.p, sent.Seconds(), answered.Seconds(), text)
	t.mu.Unlock()
}

func (t *probeTrace) close() {
	if t == nil {
		return
	}
	t.w.Flush()
	t.f.Close()
}
