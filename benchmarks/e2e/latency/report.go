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
	latencies                       []time.Duration // of acked publishes, from their release by the schedule
	lags                            []time.Duration // how late the schedule released each publish
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

// spread sorts ds and names its percentiles in µs.
func spread(ds []time.Duration) string {
	slices.Sort(ds)
	us := func(p float64) int64 { return percentile(ds, p).Microseconds() }
	return fmt.Sprintf("p50 %d p90 %d p99 %d p99.9 %d max %d", us(50), us(90), us(99), us(99.9), us(100))
}

// print writes the figures; run.sh reads the "latency" line.
func (r result) print(w io.Writer, cfg config) {
	fmt.Fprintf(w, "open loop: %.0f msgs/s of %d bytes over %d connections for %v\n", cfg.rate, cfg.size, cfg.connections, cfg.duration)
	offered := 0.0
	if r.span > 0 {
		offered = float64(r.sent) / r.span.Seconds()
	}
	fmt.Fprintf(w, "sent: %d acked: %d errors: %d unanswered: %d (%.0f msgs/s)\n", r.sent, r.acked, r.errors, r.unanswered, offered)
	fmt.Fprintf(w, "latency µs: %s\n", spread(r.latencies))
	// Latency counts from release, so a schedule running late would
	// understate it; this shows whether it did.
	fmt.Fprintf(w, "schedule lag µs: %s\n", spread(r.lags))
	if r.firstError != nil {
		fmt.Fprintf(w, "first error: %v\n", r.firstError)
	}
}
