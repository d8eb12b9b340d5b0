package channel

import (
	"math"
	"testing"
	"time"
)

func TestE2EEstimatesOverASlidingWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e := NewE2E([]float64{0.5, 0.99, 1}, 10*time.Second, t0)
	for i := 1; i <= 1000; i++ {
		e.Observe(time.Duration(i)*time.Millisecond, t0)
	}
	s := e.Summary(t0)
	if s.Count != 1000 {
		t.Fatalf("count %d, want 1000", s.Count)
	}
	want := map[float64]float64{0.5: 500e6, 0.99: 990e6, 1: 1000e6}
	for _, p := range s.Percentiles() {
		// Within the estimate's rank error: 0.1 % of 1,000 FINs, a
		// millisecond each, either way.
		if math.Abs(p.Value-want[p.Quantile]) > 2e6 {
			t.Errorf("p%g = %.0f ns, want about %.0f", p.Quantile*100, p.Value, want[p.Quantile])
		}
	}

	// Half a window later the first FINs are still counted; a whole
	// window after them they are gone.
	t5 := t0.Add(5 * time.Second)
	e.Observe(2*time.Second, t5)
	if s := e.Summary(t5); s.Count != 1001 {
		t.Fatalf("half a window on: count %d, want 1001", s.Count)
	}
	t10 := t0.Add(10 * time.Second)
	s = e.Summary(t10)
	if s.Count != 1 {
		t.Fatalf("a window on: count %d, want only the later FIN", s.Count)
	}
	if p := s.Percentiles(); p[0].Value != 2e9 {
		t.Fatalf("a window on: %+v, want 2 s", p)
	}

	// Idle for longer than a window: nothing, and every estimate 0, as
	// nsqd shows a tracked channel without FINs.
	s = e.Summary(t0.Add(time.Minute))
	if s.Count != 0 {
		t.Fatalf("after a minute idle: count %d", s.Count)
	}
	for _, p := range s.Percentiles() {
		if p.Value != 0 {
			t.Fatalf("after a minute idle: %+v", s.Percentiles())
		}
	}
}

func TestMergeE2EOfAllChannels(t *testing.T) {
	t0 := time.Unix(1000, 0)
	fast, slow := NewE2E([]float64{0.5}, time.Minute, t0), NewE2E([]float64{0.5}, time.Minute, t0)
	for range 100 {
		fast.Observe(time.Millisecond, t0)
	}
	for range 300 {
		slow.Observe(time.Second, t0)
	}
	m := MergeE2E(nil, fast.Summary(t0), nil, slow.Summary(t0))
	if m.Count != 400 {
		t.Fatalf("merged count %d", m.Count)
	}
	if p := m.Percentiles(); p[0].Value != 1e9 {
		t.Fatalf("merged p50 %+v, want the slow channel's second", p)
	}
	if MergeE2E(nil, nil) != nil {
		t.Fatal("channels without tracking merged into a summary")
	}
	var none *E2ESummary
	if none.Percentiles() != nil {
		t.Fatal("an untracked channel has percentiles")
	}
}
