package channel

import (
	"time"

	"github.com/beorn7/perks/quantile"
)

// E2E is a channel's end-to-end processing latency, from a message's
// timestamp (its publish) to its FIN, over a sliding window, as nsqd's
// --e2e-processing-latency-percentile keeps it: two quantile streams, the
// older begun half a window before the newer; every half window the older
// is emptied and becomes the newer, so the estimates cover between half a
// window and a whole one. It does no I/O; time comes in.
type E2E struct {
	quantiles []float64
	half      time.Duration
	streams   [2]*quantile.Stream
	newer     int
	turned    time.Time
}

// e2eEpsilon is the estimates' error in rank: a p99 over 10,000 FINs is
// the latency of one of the 10 around rank 9,900.
const e2eEpsilon = 0.001

// NewE2E tracks quantiles (each in (0, 1]) over window.
func NewE2E(quantiles []float64, window time.Duration, now time.Time) *E2E {
	e := &E2E{quantiles: quantiles, half: window / 2, turned: now}
	for i := range e.streams {
		e.streams[i] = e.newStream()
	}
	return e
}

func (e *E2E) newStream() *quantile.Stream { return targeted(e.quantiles) }

// targeted is a stream that keeps each of quantiles within e2eEpsilon.
func targeted(quantiles []float64) *quantile.Stream {
	targets := make(map[float64]float64, len(quantiles))
	for _, q := range quantiles {
		targets[q] = e2eEpsilon
	}
	return quantile.NewTargeted(targets)
}

// Observe records one FIN's latency.
func (e *E2E) Observe(latency time.Duration, now time.Time) {
	e.turn(now)
	e.streams[e.newer].Insert(float64(latency.Nanoseconds()))
}

func (e *E2E) turn(now time.Time) {
	if e.half <= 0 {
		return
	}
	for now.Sub(e.turned) >= e.half {
		e.newer = 1 - e.newer
		e.streams[e.newer].Reset()
		e.turned = e.turned.Add(e.half)
		if now.Sub(e.turned) >= 2*e.half {
			e.turned = now // idle for a window: both are empty now
		}
	}
}

// Summary is the window's count and estimates, and its samples for a
// topic to merge with its other channels'.
func (e *E2E) Summary(now time.Time) *E2ESummary {
	e.turn(now)
	s := &E2ESummary{Quantiles: e.quantiles}
	for _, st := range e.streams {
		s.Count += st.Count()
		s.Samples = append(s.Samples, st.Samples()...)
	}
	return s
}

// E2ESummary is one or more channels' end-to-end latency over the window.
type E2ESummary struct {
	Quantiles []float64
	Count     int
	Samples   quantile.Samples
}

// Percentile is one estimate: the latency, in nanoseconds, under which
// that fraction of the window's FINs came.
type Percentile struct {
	Quantile float64
	Value    float64
}

// Percentiles estimates each of the summary's quantiles, 0 without a FIN
// in the window, as nsqd reports them.
func (s *E2ESummary) Percentiles() []Percentile {
	if s == nil {
		return nil
	}
	st := targeted(s.Quantiles)
	st.Merge(s.Samples)
	out := make([]Percentile, 0, len(s.Quantiles))
	for _, q := range s.Quantiles {
		v := 0.0
		if s.Count > 0 {
			v = st.Query(q)
		}
		out = append(out, Percentile{Quantile: q, Value: v})
	}
	return out
}

// MergeE2E is the summary of several channels' (a topic's); nil when
// none tracks its latency.
func MergeE2E(summaries ...*E2ESummary) *E2ESummary {
	var out *E2ESummary
	for _, s := range summaries {
		if s == nil {
			continue
		}
		if out == nil {
			out = &E2ESummary{Quantiles: s.Quantiles}
		}
		out.Count += s.Count
		out.Samples = append(out.Samples, s.Samples...)
	}
	return out
}
