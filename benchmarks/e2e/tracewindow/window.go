package main

import (
	"cmp"
	"errors"
	"io"
	"math"
	"slices"

	"golang.org/x/exp/trace"
)

// Window is what a trace shows of [From, To), in seconds from its first
// event: the CPU profile's samples taken then, by function, and how many
// goroutines were running in each Bucket-long slice of it.
type Window struct {
	From, To, Bucket float64
	// Samples counts the CPU samples in the window, and BySlice those of
	// each slice.
	Samples int
	BySlice []int
	// Running is, for each slice, the goroutines' time in the running
	// state over the slice's length: the cores the process held, as the Go
	// runtime saw it (a thread the kernel has set aside still counts).
	Running []float64
	// Flat counts the samples whose innermost frame is a function, Cum
	// those with the function anywhere on their stack.
	Flat, Cum map[string]int
}

// Read reads a trace (runtime/trace's format, as /debug/pprof/trace
// writes it) and returns what it shows of [from, to). The trace carries
// CPU samples only when a CPU profile ran beside it.
func Read(r io.Reader, from, to, bucket float64) (*Window, error) {
	if !(to > from) || !(bucket > 0) {
		return nil, errors.New("tracewindow: want from < to and a bucket above 0")
	}
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	// Less a hair, so a window of whole slices gets no empty one from
	// rounding (0.9 / 0.1 is a little over 9).
	n := int(math.Ceil((to-from)/bucket - 1e-9))
	w := &Window{From: from, To: to, Bucket: bucket, BySlice: make([]int, n), Running: make([]float64, n),
		Flat: map[string]int{}, Cum: map[string]int{}}
	var t0 trace.Time
	since := map[trace.GoID]float64{} // when each running goroutine began to run
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			return w, nil
		}
		if err != nil {
			return nil, err
		}
		if t0 == 0 {
			t0 = ev.Time()
		}
		at := float64(ev.Time()-t0) / 1e9
		switch ev.Kind() {
		case trace.EventStackSample:
			w.sample(at, ev.Stack())
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			old, next := st.Goroutine()
			if next == trace.GoRunning {
				since[g] = at
			}
			if old == trace.GoRunning {
				if began, ok := since[g]; ok {
					w.ran(began, at)
					delete(since, g)
				}
			}
		}
	}
}

func (w *Window) sample(at float64, st trace.Stack) {
	if at < w.From || at >= w.To {
		return
	}
	w.Samples++
	w.BySlice[min(int((at-w.From)/w.Bucket), len(w.BySlice)-1)]++
	seen := map[string]bool{}
	for f := range st.Frames() {
		if len(seen) == 0 {
			w.Flat[f.Func]++
		}
		if !seen[f.Func] {
			seen[f.Func] = true
			w.Cum[f.Func]++
		}
	}
}

// ran adds a goroutine's run over [a, b) to the slices it overlaps.
// Each slice's bounds are computed from its index, not carried over, so
// rounding can neither skip a slice nor stall on one.
func (w *Window) ran(a, b float64) {
	a, b = max(a, w.From), min(b, w.To)
	if a >= b {
		return
	}
	last := len(w.Running) - 1
	for i := min(int((a-w.From)/w.Bucket), last); i <= last; i++ {
		lo := max(a, w.From+float64(i)*w.Bucket)
		if lo >= b {
			return
		}
		hi := b
		if i < last {
			hi = min(b, w.From+float64(i+1)*w.Bucket)
		}
		if hi > lo {
			w.Running[i] += (hi - lo) / w.Bucket
		}
	}
}

// Count is a function and its samples.
type Count struct {
	Func    string
	Samples int
}

// Top is the n functions of counts with the most samples, most first.
func Top(counts map[string]int, n int) []Count {
	var out []Count
	for f, k := range counts {
		out = append(out, Count{f, k})
	}
	slices.SortFunc(out, func(a, b Count) int {
		return cmp.Or(cmp.Compare(b.Samples, a.Samples), cmp.Compare(a.Func, b.Func))
	})
	return out[:min(n, len(out))]
}
