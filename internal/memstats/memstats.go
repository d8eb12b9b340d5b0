// Package memstats reads the Go runtime's memory figures that nsqd reports
// in /stats and to statsd, under nsqd's names.
package memstats

import (
	"runtime"
	"slices"
)

// Stats are nsqd's memory figures; the pauses are over the last 256
// collections at most, in microseconds.
type Stats struct {
	HeapObjects       uint64 `json:"heap_objects"`
	HeapIdleBytes     uint64 `json:"heap_idle_bytes"`
	HeapInUseBytes    uint64 `json:"heap_in_use_bytes"`
	HeapReleasedBytes uint64 `json:"heap_released_bytes"`
	GCPauseUsec100    uint64 `json:"gc_pause_usec_100"`
	GCPauseUsec99     uint64 `json:"gc_pause_usec_99"`
	GCPauseUsec95     uint64 `json:"gc_pause_usec_95"`
	NextGCBytes       uint64 `json:"next_gc_bytes"`
	GCTotalRuns       uint32 `json:"gc_total_runs"`
}

// Read stops the world briefly, as runtime.ReadMemStats does.
func Read() Stats {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := int(min(ms.NumGC, uint32(len(ms.PauseNs))))
	pauses := make([]uint64, n)
	for i := range n {
		pauses[i] = ms.PauseNs[i] / 1000
	}
	slices.Sort(pauses)
	pct := func(p float64) uint64 {
		if n == 0 {
			return 0
		}
		return pauses[min(n-1, int(float64(n)*p))]
	}
	return Stats{
		HeapObjects:       ms.HeapObjects,
		HeapIdleBytes:     ms.HeapIdle,
		HeapInUseBytes:    ms.HeapInuse,
		HeapReleasedBytes: ms.HeapReleased,
		GCPauseUsec100:    pct(1),
		GCPauseUsec99:     pct(0.99),
		GCPauseUsec95:     pct(0.95),
		NextGCBytes:       ms.NextGC,
		GCTotalRuns:       ms.NumGC,
	}
}
