package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// closedLoop is what write and read share: how long, how many
// connections, and the message size the rate is quoted in bytes for.
type closedLoop struct {
	target
	runfor      time.Duration
	size        int
	connections int
}

func (c *closedLoop) addFlags(fs *flag.FlagSet) {
	c.target.addFlags(fs)
	fs.DurationVar(&c.runfor, "runfor", 10*time.Second, "how long to run")
	fs.IntVar(&c.size, "size", 200, "message body size in bytes")
	// nsq's bench_writer and bench_reader open one connection per
	// GOMAXPROCS; the same here keeps the comparison like for like.
	fs.IntVar(&c.connections, "connections", runtime.GOMAXPROCS(0), "connections, each with one worker")
}

func (c closedLoop) validate() error {
	switch {
	case c.runfor <= 0:
		return fmt.Errorf("--runfor %v must be positive", c.runfor)
	case c.size < 1:
		return fmt.Errorf("--size %d must be at least 1", c.size)
	case c.connections < 1:
		return fmt.Errorf("--connections %d must be at least 1", c.connections)
	}
	return c.target.validate()
}

// worker is one connection's loop: prepared before the clock starts,
// then run until ctx is done, returning how many messages it moved.
type worker interface {
	run(ctx context.Context) (int64, error)
	close()
}

// runWorkers prepares c.connections workers, starts them together, stops
// them after c.runfor and prints the total in bench_writer's format.
func runWorkers(c closedLoop, prepare func() (worker, error), out io.Writer) error {
	workers := make([]worker, 0, c.connections)
	defer func() {
		for _, w := range workers {
			w.close()
		}
	}()
	for range c.connections {
		w, err := prepare()
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.runfor)
	defer cancel()
	var (
		total    atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	start := time.Now()
	for _, w := range workers {
		wg.Go(func() {
			n, err := w.run(ctx)
			total.Add(n)
			if err != nil {
				errOnce.Do(func() { firstErr = err })
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	printThroughput(out, time.Since(start), total.Load(), c.size)
	return nil
}

// printThroughput prints the line nsq's bench tools end with, which
// run.sh parses.
func printThroughput(w io.Writer, d time.Duration, msgs int64, size int) {
	fmt.Fprintf(w, "duration: %s - %.03fmb/s - %.03fops/s - %.03fus/op\n",
		d,
		float64(msgs*int64(size))/d.Seconds()/1024/1024,
		float64(msgs)/d.Seconds(),
		float64(d/time.Microsecond)/float64(msgs))
}
