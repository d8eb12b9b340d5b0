package topic

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// An idle writer has no deadline: its partition arms no timer.
func TestIdleWriterHasNoDeadline(t *testing.T) {
	w := threeReplicaWriter()
	if !w.Idle() || !w.NextDeadline().IsZero() {
		t.Fatalf("new writer: idle %v, deadline %v", w.Idle(), w.NextDeadline())
	}
	offer(t, w, "a", "a")
	if w.Idle() {
		t.Fatal("idle with a publish queued")
	}
	if d := w.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v for a queued publish: only a flush starts it", d)
	}
}

// The deadline follows the head write through its life: the write timeout
// while no majority acked, the shrink once one has, none while the shrink
// is asked for (its answer settles the write), the shrink again when the
// metadata refused it, and none once the write committed.
func TestWriterDeadlineFollowsTheHeadWrite(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	timeout, shrink := t0.Add(5*time.Second), t0.Add(time.Second)
	if d := w.NextDeadline(); !d.Equal(timeout) {
		t.Fatalf("no ack yet: deadline %v, want the write timeout %v", d, timeout)
	}
	w.Acked("n2", wr.Record.LogID, nil)
	if d := w.NextDeadline(); !d.Equal(shrink) {
		t.Fatalf("majority acked: deadline %v, want the shrink %v", d, shrink)
	}
	if r := w.Tick(shrink.Add(-time.Nanosecond)); len(r.ShrinkISR) != 0 {
		t.Fatal("shrank before the deadline")
	}
	if r := w.Tick(shrink); len(r.ShrinkISR) != 1 {
		t.Fatalf("no shrink at the deadline: %+v", r)
	}
	if d := w.NextDeadline(); !d.IsZero() {
		t.Fatalf("shrink under way: deadline %v, want none: the shrink's answer comes next", d)
	}
	w.ISRShrunk(errors.New("cas conflict"))
	if d := w.NextDeadline(); !d.Equal(shrink) {
		t.Fatalf("shrink refused: deadline %v, want the shrink %v again (retried at once)", d, shrink)
	}
	w.Tick(shrink.Add(time.Millisecond))
	if r := w.ISRShrunk(nil); len(r.Commits) != 1 {
		t.Fatalf("no commit on the smaller ISR: %+v", r)
	}
	if !w.Idle() || !w.NextDeadline().IsZero() {
		t.Fatalf("after the commit: idle %v, deadline %v", w.Idle(), w.NextDeadline())
	}
}

// Without --write-timeout and before a majority acked nothing is due.
func TestWriterWithoutTimeRulesHasNoDeadline(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4}, Position{})
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if d := w.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v with no time rule set", d)
	}
}

// NextDeadline agrees with Tick whatever happened before: Tick does nothing
// until the deadline and acts at it, and with no deadline it never acts.
func TestNextDeadlineAgreesWithTick(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		w := NewWriter(WriterConfig{
			Epoch: 1, Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4, MaxBatchMessages: 1,
			ShrinkAfter: time.Duration(rng.IntN(3)) * time.Second, WriteTimeout: time.Duration(rng.IntN(2)) * 5 * time.Second,
		}, Position{})
		now := t0
		var ids []int64
		for step := range 12 {
			now = now.Add(time.Duration(rng.IntN(700)) * time.Millisecond)
			switch rng.IntN(6) {
			case 0, 1:
				if w.Offer(Publish{Bodies: bodies("m"), Token: step}) == nil {
					if wr := w.NextWrite(now); wr != nil {
						w.LocalWritten(wr.Record.LogID, nil)
						ids = append(ids, wr.Record.LogID)
					}
				}
			case 2:
				if len(ids) > 0 {
					w.Acked([]string{"n2", "n3"}[rng.IntN(2)], ids[rng.IntN(len(ids))], nil)
				}
			case 3:
				w.ISRShrunk([]error{nil, errors.New("refused")}[rng.IntN(2)])
			case 4:
				w.FollowerDown([]string{"n2", "n3"}[rng.IntN(2)])
			}
			d := w.NextDeadline()
			if d.IsZero() {
				if r := w.Tick(now.Add(time.Hour)); !emptyReady(r) {
					t.Fatalf("round %d step %d: no deadline but Tick acted an hour later: %+v", round, step, r)
				}
				continue
			}
			if before := d.Add(-time.Nanosecond); before.After(now) || before.Equal(now) {
				if r := w.Tick(before); !emptyReady(r) {
					t.Fatalf("round %d step %d: Tick acted before the deadline %v: %+v", round, step, d, r)
				}
			}
			at := d
			if at.Before(now) {
				at = now // a deadline already past: the shell's timer fires at once
			}
			if r := w.Tick(at); emptyReady(r) {
				t.Fatalf("round %d step %d: Tick did nothing at the deadline %v", round, step, d)
			}
			now = at
		}
	}
}

func emptyReady(r Ready) bool {
	return r.Truncate == nil && len(r.Sends) == 0 && len(r.Commits) == 0 && len(r.Replies) == 0 && len(r.ShrinkISR) == 0 && !r.LeaveISR
}
