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

// spin loops for d, so a CPU profile taken meanwhile samples its caller.
func spin(d time.Duration) (n int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		n++
	}
	return n
}

// warm and burn spin one after the other, each on the stacks of the
// samples of its own stretch of the trace.
//
//go:noinline
func warm(d time.Duration) int { return spin(d) }

//go:noinline
func burn(d time.Duration) int { return spin(d) }

// A trace taken beside a CPU profile puts the profile's samples in the
// window they were taken in, with the function that spun on their stacks,
// and a goroutine that spun shows as a core held in those slices; the
// window before, where another function spun, has no sample of it.
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
	warm(300 * time.Millisecond)
	warmed := time.Since(start).Seconds()
	burn(400 * time.Millisecond)
	burnt := time.Since(start).Seconds()
	trace.Stop()
	pprof.StopCPUProfile()

	// The trace's clock starts a little before start: each window keeps
	// 50 ms clear of the switch from one function to the other.
	busy, err := Read(bytes.NewReader(tr.Bytes()), warmed+0.05, burnt-0.05, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	inBurn := samplesOf(busy, ".burn")
	if busy.Samples == 0 || inBurn*2 < busy.Samples {
		t.Fatalf("%d samples in burn's window, %d of them in burn: want most", busy.Samples, inBurn)
	}
	var held float64
	for _, r := range busy.Running {
		held += r
	}
	if held < 0.5*float64(len(busy.Running)) {
		t.Fatalf("running cores by slice %v while a goroutine spun: want about one in each", busy.Running)
	}
	if top := Top(busy.Cum, 1); len(top) != 1 || top[0].Samples < inBurn {
		t.Fatalf("Top gives %v, want the most sampled function first", top)
	}

	before, err := Read(bytes.NewReader(tr.Bytes()), 0, warmed-0.05, 0.1)
	if err != nil {
		t.Fatal(err)
	}
	if samplesOf(before, ".burn") > 0 || samplesOf(before, ".warm") == 0 {
		t.Fatalf("the window before burn ran: want warm's samples and none of burn's, got %v", before.Cum)
	}
}

// samplesOf counts the samples of w with a function named with suffix
// on their stacks.
func samplesOf(w *Window, suffix string) (n int) {
	for f, k := range w.Cum {
		if strings.HasSuffix(f, suffix) {
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
