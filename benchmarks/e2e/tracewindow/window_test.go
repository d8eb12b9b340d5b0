package main

import (
	"bytes"
	"io"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// burn spins for d, so a CPU profile taken meanwhile samples it.
//
//go:noinline
func burn(d time.Duration) (n int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		n++
	}
	return n
}

// A trace taken beside a CPU profile puts the profile's samples in the
// window they were taken in, with the function that spun on their stacks,
// and a goroutine that spun shows as a core held in those slices; a window
// after the spin has neither.
func TestWindowShowsWhereTheCPUWent(t *testing.T) {
	var tr bytes.Buffer
	if err := pprof.StartCPUProfile(io.Discard); err != nil {
		t.Fatal("this test takes its own CPU profile; run it without -cpuprofile:", err)
	}
	if err := trace.Start(&tr); err != nil {
		pprof.StopCPUProfile()
		t.Fatal(err)
	}
	start := time.Now()
	burn(400 * time.Millisecond)
	spun := time.Since(start).Seconds()
	time.Sleep(300 * time.Millisecond)
	trace.Stop()
	pprof.StopCPUProfile()

	busy, err := Read(bytes.NewReader(tr.Bytes()), 0, spun, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	burnt := burnSamples(busy)
	if busy.Samples == 0 || burnt*2 < busy.Samples {
		t.Fatalf("%d samples in the spin's window, %d of them in burn: want most", busy.Samples, burnt)
	}
	var held float64
	for _, r := range busy.Running {
		held += r
	}
	if held < 0.5*float64(len(busy.Running)) {
		t.Fatalf("running cores by slice %v while a goroutine spun: want about one in each", busy.Running)
	}

	idle, err := Read(bytes.NewReader(tr.Bytes()), spun+0.1, spun+0.3, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if burnSamples(idle) > 0 {
		t.Fatalf("burn sampled after it returned: %v", idle.Cum)
	}
	if top := Top(busy.Cum, 1); len(top) != 1 || top[0].Samples < burnt {
		t.Fatalf("Top gives %v, want the most sampled function first", top)
	}
}

// burnSamples counts the samples of w with burn on their stacks.
func burnSamples(w *Window) (n int) {
	for f, k := range w.Cum {
		if strings.HasSuffix(f, ".burn") {
			n += k
		}
	}
	return n
}

func TestReadRefusesAnEmptyWindow(t *testing.T) {
	if _, err := Read(strings.NewReader(""), 2, 1, 0.1); err == nil {
		t.Fatal("a window ending before it starts was read")
	}
	if _, err := Read(strings.NewReader(""), 0, 1, 0); err == nil {
		t.Fatal("a slice of no length was taken")
	}
}
