package protocol

import (
	"testing"
	"time"
)

// afterWindow starts f's count at t0 with no FINs and ends its first window
// with fins read, returning the decision then.
func afterWindow(f *finReads, t0 time.Time, fins, inFlight int64) time.Duration {
	f.wait(t0, 0, inFlight)
	return f.wait(t0.Add(finRateWindow), fins, inFlight)
}

func TestFINReadsWaitWhileTheClientHoldsManyMessages(t *testing.T) {
	f := finReads{delay: time.Millisecond}
	// go-nsq's Consumer with 2,500 in flight finishing 100,000 a second
	// holds 25 ms of work: far more than eight waits.
	if got := afterWindow(&f, time.Unix(100, 0), 1000, 2500); got != time.Millisecond {
		t.Fatalf("wait = %v, want the 1ms delay", got)
	}
}

func TestFINReadsReadAtOnceWhenTheClientWouldRunShort(t *testing.T) {
	for _, c := range []struct {
		name           string
		fins, inFlight int64
	}{
		// 720,000 a second with 2,500 in flight holds 3.5 ms: under
		// eight waits, so waiting could leave the client idle.
		{"fast client", 7200, 2500},
		// RDY 1: nothing held once the FIN is read.
		{"nothing in flight", 100, 0},
	} {
		f := finReads{delay: time.Millisecond}
		if got := afterWindow(&f, time.Unix(100, 0), c.fins, c.inFlight); got != 0 {
			t.Errorf("%s: wait = %v, want 0", c.name, got)
		}
	}
}

func TestFINReadsNeedAWholeWindowForARate(t *testing.T) {
	f := finReads{delay: time.Millisecond}
	t0 := time.Unix(100, 0)
	if got := f.wait(t0, 0, 2500); got != 0 {
		t.Fatalf("first FIN: wait = %v, want 0", got)
	}
	if got := f.wait(t0.Add(finRateWindow/2), 500, 2500); got != 0 {
		t.Fatalf("half a window in: wait = %v, want 0 until a rate is known", got)
	}
	if got := f.wait(t0.Add(finRateWindow), 1000, 2500); got != time.Millisecond {
		t.Fatalf("a window in: wait = %v, want 1ms", got)
	}
}

func TestFINReadsFollowTheRate(t *testing.T) {
	f := finReads{delay: time.Millisecond}
	t0 := time.Unix(100, 0)
	if got := afterWindow(&f, t0, 1000, 2500); got != time.Millisecond {
		t.Fatalf("at 100,000/s: wait = %v, want 1ms", got)
	}
	// The client speeds up to 800,000 a second: 2,500 no longer last
	// eight waits.
	if got := f.wait(t0.Add(2*finRateWindow), 1000+8000, 2500); got != 0 {
		t.Fatalf("at 800,000/s: wait = %v, want 0", got)
	}
	// Within the next window the last rate holds.
	if got := f.wait(t0.Add(2*finRateWindow+time.Millisecond), 9100, 2500); got != 0 {
		t.Fatalf("mid-window: wait = %v, want 0 (the last rate)", got)
	}
}

func TestFINReadsNeverWaitWhenOff(t *testing.T) {
	var f finReads
	if got := afterWindow(&f, time.Unix(100, 0), 10, 2500); got != 0 {
		t.Fatalf("delay 0: wait = %v, want 0", got)
	}
}
