package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// errTimedOut is a wait that --timeout ended before the operation did.
var errTimedOut = errors.New("timed out")

// errRolledBack is a move the cluster undid (its target left).
var errRolledBack = errors.New("the move was rolled back: the target left and the source stays")

// poll reads an operation's state once: a reading, and whether it ended.
type poll func(ctx context.Context) (reading, bool, error)

// follower shows an operation's progress until it ends: a bar redrawn in
// place on a terminal, else a plain line when the figures change and at
// least every quiet interval.
type follower struct {
	out      io.Writer
	tty      bool
	interval time.Duration // between polls
	quiet    time.Duration // longest gap between plain lines
	title    string
}

// run polls until the operation ends or ctx does. A node that does not
// answer (one restarting) is asked again until then; a refusal or a
// rolled-back move ends the wait.
func (f follower) run(ctx context.Context, p poll) error {
	var first reading
	var pace float64 // the last pace measured
	var lastErr error
	var shown string
	var shownAt time.Time
	width := 0
	defer func() {
		if width > 0 {
			fmt.Fprintln(f.out)
		}
	}()
	for {
		r, done, err := p(ctx)
		var unanswered *url.Error
		var ref *refusal
		switch {
		case err != nil && errors.As(err, &unanswered) && !errors.As(err, &ref):
			lastErr = err
		case err != nil:
			return err
		default:
			if first.unit != r.unit {
				first = r
			}
			m := measure(first, r, pace)
			pace = m.pace
			if f.tty {
				line := f.title + " " + bar(m)
				fmt.Fprint(f.out, "\r"+line+strings.Repeat(" ", max(width-len(line), 0)))
				width = len(line)
			} else if key := withoutETA(m); key != shown || time.Since(shownAt) >= f.quiet || done {
				fmt.Fprintln(f.out, f.title+" "+figures(m))
				shown, shownAt = key, time.Now()
			}
			if done {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return fmt.Errorf("%w (last error: %v)", errTimedOut, lastErr)
			}
			return errTimedOut
		case <-time.After(f.interval):
		}
	}
}

// withoutETA is p's figures but for the ETA, which moves at every poll:
// plain lines are written when the rest changes.
func withoutETA(p progress) string {
	p.eta = -1
	return figures(p)
}
