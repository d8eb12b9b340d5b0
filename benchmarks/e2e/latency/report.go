package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// result is what a run measured.
type result struct {
	sent, acked, errors, unanswered int64
	latencies                       []time.Duration // of acked publishes, from their scheduled time
	lag                             time.Duration   // most a publish started behind its schedule
	span                            time.Duration   // from the first scheduled publish to the last one made
	firstError                      error
}

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// print writes the figures; run.sh reads the "latency" line.
func (r result) print(w io.Writer, cfg config) {
	slices.Sort(r.latencies)
	fmt.Fprintf(w, "open loop: %.0f msgs/s of %d bytes over %d connections for %v\n", cfg.rate, cfg.size, cfg.connections, cfg.duration)
	offered := 0.0
	if r.span > 0 {
		offered = float64(r.sent) / r.span.Seconds()
	}
	fmt.Fprintf(w, "sent: %d acked: %d errors: %d unanswered: %d (%.0f msgs/s sent, at most %d µs behind schedule)\n",
		r.sent, r.acked, r.errors, r.unanswered, offered, r.lag.Microseconds())
	us := func(p float64) int64 { return percentile(r.latencies, p).Microseconds() }
	fmt.Fprintf(w, "latency µs: p50 %d p90 %d p99 %d p99.9 %d max %d\n", us(50), us(90), us(99), us(99.9), us(100))
	if r.firstError != nil {
		fmt.Fprintf(w, "first error: %v\n", r.firstError)
	}
}
