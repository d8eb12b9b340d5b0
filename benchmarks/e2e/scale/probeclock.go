package main

import (
	"context"
	"fmt"
	"time"
)

// clockEntry is one partition a probing connection still has to get a PUB
// through: due is when it may be sent (again).
type clockEntry struct {
	i   int
	due time.Time
}

// errStalled ends a clock run whose connection answered nothing for
// clockStall with PUBs unanswered.
var errStalled = fmt.Errorf("no answer for %v", clockStall)

const clockStall = 5 * time.Second

// clockRun probes on one connection as an asynchronous producer does: at
// most window PUBs unanswered, each partition sent when due, and one that
// was refused due again retry after the refusal was read, on its own clock
// rather than after the rest of the connection's share. send buffers a
// PUB for entry i (the caller flushes through flush); answered takes its
// answer ("" for OK) and reports whether to try again. It returns the
// entries without an OK when the connection failed (with the error), or
// none once every entry took a PUB, ctx ended or the deadline passed.
func clockRun(ctx context.Context, pc *pubConn, window int, retry time.Duration, deadline time.Time,
	queue []clockEntry, send func(i int), answered func(i int, text string) bool) ([]clockEntry, error) {
	type read struct {
		text string
		err  error
	}
	answers := make(chan read, window)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			text, err := pc.readAnswer()
			select {
			case answers <- read{text, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var out []clockEntry // sent, unanswered, in the order sent
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	end := time.NewTimer(time.Until(deadline))
	defer end.Stop()
	lastAnswer := time.Now()
	for len(queue) > 0 || len(out) > 0 {
		now := time.Now()
		pc.mu.Lock()
		sent := 0
		for len(out) < window && len(queue) > 0 && !queue[0].due.After(now) {
			send(queue[0].i)
			out, queue = append(out, queue[0]), queue[1:]
			sent++
		}
		var err error
		if sent > 0 {
			err = pc.w.Flush()
		}
		pc.mu.Unlock()
		if err != nil {
			return append(out, queue...), err
		}
		if len(out) < window && len(queue) > 0 {
			wake.Reset(time.Until(queue[0].due))
		}
		stall := time.Duration(1<<63 - 1)
		if len(out) > 0 {
			stall = clockStall - time.Since(lastAnswer)
		}
		select {
		case a := <-answers:
			if a.err != nil {
				return append(out, queue...), a.err
			}
			lastAnswer = time.Now()
			e := out[0]
			out = out[1:]
			if answered(e.i, a.text) {
				e.due = time.Now().Add(retry)
				queue = append(queue, e)
			}
		case <-wake.C:
		case <-time.After(stall):
			return append(out, queue...), errStalled
		case <-end.C:
			return nil, nil
		case <-ctx.Done():
			return nil, nil
		}
	}
	return nil, nil
}
