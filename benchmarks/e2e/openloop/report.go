package openloop

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Result is what a run measured.
type Result struct {
	Sent, Acked, Errors, Unanswered int64
	Latencies                       []time.Duration // of acked publishes, from their release by the schedule
	Lags                            []time.Duration // how late the schedule released each publish
	Span                            time.Duration   // from the first scheduled publish to the last one made
	FirstError                      error
}

// Percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// spread sorts ds and names its percentiles in µs.
func spread(ds []time.Duration) string {
	slices.Sort(ds)
	us := func(p float64) int64 { return Percentile(ds, p).Microseconds() }
	return fmt.Sprintf("p50 %d p90 %d p99 %d p99.9 %d max %d", us(50), us(90), us(99), us(99.9), us(100))
}

// Print writes the figures; benchmarks/e2e/run.sh reads the "sent:" and
// "latency" lines.
func (r Result) Print(w io.Writer, cfg Config) {
	fmt.Fprintf(w, "open loop: %.0f msgs/s of %d bytes over %d connections for %v\n", cfg.Rate, cfg.Size, cfg.Connections, cfg.Duration)
	offered := 0.0
	if r.Span > 0 {
		offered = float64(r.Sent) / r.Span.Seconds()
	}
	fmt.Fprintf(w, "sent: %d acked: %d errors: %d unanswered: %d (%.0f msgs/s)\n", r.Sent, r.Acked, r.Errors, r.Unanswered, offered)
	fmt.Fprintf(w, "latency µs: %s\n", spread(r.Latencies))
	// Latency counts from release, so a schedule running late would
	// understate it; this shows whether it did.
	fmt.Fprintf(w, "schedule lag µs: %s\n", spread(r.Lags))
	if r.FirstError != nil {
		fmt.Fprintf(w, "first error: %v\n", r.FirstError)
	}
}
