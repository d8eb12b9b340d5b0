package topic

import (
	"errors"
	"testing"
	"time"
)

// laggingWriter is a leader of three replicas whose connected followers
// may lag 4 s (LagMax) before they leave the ISR; ShrinkAfter, 1 s, no
// longer applies to them.
func laggingWriter() *Writer {
	w := threeReplicaWriter()
	w.cfg.LagMax = 4 * time.Second
	return w
}

// A follower that is behind but connected is slow, not out of sync: it
// stays in the ISR past ShrinkAfter, and leaves only once the write it
// holds up is LagMax old; the write then commits on the smaller ISR.
func TestSlowFollowerLeavesTheISROnlyAfterLagMax(t *testing.T) {
	w := laggingWriter()
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if d := w.NextDeadline(); !d.Equal(t0.Add(4 * time.Second)) {
		t.Fatalf("deadline %v, want LagMax after the write", d)
	}
	for _, at := range []time.Duration{time.Second, 2 * time.Second, 4*time.Second - time.Nanosecond} {
		if r := w.Tick(t0.Add(at)); len(r.ShrinkISR) != 0 || r.LeaveISR {
			t.Fatalf("at +%v a connected follower behind was shrunk out: %+v", at, r)
		}
	}
	r := w.Tick(t0.Add(4 * time.Second))
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
		t.Fatalf("at LagMax: %+v, want n3 shrunk out", r)
	}
	if r := w.ISRShrunk(nil); len(r.Commits) != 1 || len(r.Replies) != 1 || r.Replies[0].Err != nil {
		t.Fatalf("after the shrink: %+v, want the write committed and answered OK", r)
	}
}

// A follower that failed a write leaves at once, whatever LagMax says: it
// is out of sync for a reason of its own.
func TestFailedFollowerLeavesAtOnceWhateverLagMax(t *testing.T) {
	w := laggingWriter()
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	r := w.Acked("n3", wr.Record.LogID, errors.New("disk full"))
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
		t.Fatalf("refused by n3: %+v, want n3 shrunk out at once", r)
	}
	w = laggingWriter()
	wr = writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if r := w.FollowerDown("n3"); len(r.ShrinkISR) != 1 {
		t.Fatalf("n3's stream down: %+v, want n3 shrunk out at once", r)
	}
}

// A write a majority acked is safe to commit once its laggards are out:
// at the write timeout it shrinks them instead of stepping down, so a
// partition never loses its leader for one slow follower.
func TestWriteTimeoutWithAMajorityShrinksInsteadOfSteppingDown(t *testing.T) {
	w := NewWriter(WriterConfig{
		Partition: 1, Epoch: 4, Replicas: 3, Followers: []string{"n2", "n3"},
		Window: 8, LagMax: time.Minute, WriteTimeout: 5 * time.Second,
	}, Position{})
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if d := w.NextDeadline(); !d.Equal(t0.Add(5 * time.Second)) {
		t.Fatalf("deadline %v, want the write timeout", d)
	}
	r := w.Tick(t0.Add(5 * time.Second))
	if r.LeaveISR || len(r.Replies) != 0 || r.Truncate != nil {
		t.Fatalf("at the write timeout with a majority acked: %+v, want no step-down", r)
	}
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
		t.Fatalf("at the write timeout: %+v, want n3 shrunk out", r)
	}
	if r := w.Tick(t0.Add(6 * time.Second)); r.LeaveISR || len(r.ShrinkISR) != 0 {
		t.Fatalf("with the shrink under way: %+v, want to wait for its answer", r)
	}
	if r := w.ISRShrunk(nil); len(r.Commits) != 1 {
		t.Fatalf("after the shrink: %+v, want the write committed", r)
	}
	if !w.Writable() {
		t.Fatal("the leader stopped taking writes")
	}
}

// Without a majority, or once the metadata refused the shrink, the write
// timeout steps down as it always did: nothing else can commit the write.
func TestWriteTimeoutStepsDownWithoutAMajorityOrAfterARefusedShrink(t *testing.T) {
	w := laggingWriter()
	writeOne(t, w, "a", t0)
	if r := w.Tick(t0.Add(5 * time.Second)); !r.LeaveISR || len(r.Replies) != 1 || r.Replies[0].Err != ErrWriteTimeout {
		t.Fatalf("no ack at the write timeout: %+v, want a step-down failing the write", r)
	}

	w = laggingWriter()
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if r := w.Tick(t0.Add(4 * time.Second)); len(r.ShrinkISR) != 1 {
		t.Fatalf("at LagMax: %+v, want a shrink", r)
	}
	w.ISRShrunk(errors.New("etcd: context deadline exceeded"))
	if r := w.Tick(t0.Add(5 * time.Second)); !r.LeaveISR || len(r.ShrinkISR) != 0 {
		t.Fatalf("at the write timeout after a refused shrink: %+v, want a step-down", r)
	}
}
