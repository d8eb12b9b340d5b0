// Command tracewindow reads an execution trace taken beside a CPU profile
// (a node's /debug/pprof/trace while /debug/pprof/profile runs, as the
// mass-failover test's PARTITA_MASS_FAILOVER_TRACE=1 takes them) and
// prints what it shows of one window of it: the cores the process's
// goroutines held and its CPU samples slice by slice, and the functions
// the samples fell in. go tool trace shows one moment at a time; this
// answers where the CPU of a second of a failover went.
//
//	go run ./tracewindow -from=2.0 -to=3.0 n1.trace
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	from := flag.Float64("from", 0, "the window's start, in seconds from the trace's first event")
	to := flag.Float64("to", 5, "the window's end, in seconds from the trace's first event")
	bucket := flag.Float64("slice", 0.1, "the length of each slice of the window, in seconds")
	top := flag.Int("top", 30, "how many functions to list")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: tracewindow [-from s] [-to s] [-slice s] [-top n] trace-file")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	w, err := Read(f, *from, *to, *bucket)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("window %.2f–%.2f s: %d CPU samples\n", w.From, w.To, w.Samples)
	if w.Samples == 0 {
		fmt.Println("(no CPU samples: take a CPU profile while the trace runs)")
	}
	fmt.Println("slice      running cores  samples")
	for i := range w.Running {
		fmt.Printf("%5.2f s  %14.2f  %7d\n", w.From+float64(i)*w.Bucket, w.Running[i], w.BySlice[i])
	}
	for _, part := range []struct {
		name   string
		counts map[string]int
	}{{"innermost", w.Flat}, {"anywhere on the stack", w.Cum}} {
		fmt.Printf("\nsamples by function, %s:\n", part.name)
		for _, c := range Top(part.counts, *top) {
			fmt.Printf("%6d %5.1f%%  %s\n", c.Samples, 100*float64(c.Samples)/float64(max(w.Samples, 1)), c.Func)
		}
	}
}
