package protocol

import "time"

// A consumer's FINs arrive one per write from most clients (go-nsq writes
// and flushes each). A reader that is back in read before the next one
// comes is woken for every FIN, and so is the client's writer: each FIN
// then goes down the loopback or network stack as its own segment and is
// acknowledged on its own. When the client holds many messages, nothing is
// lost by letting FINs gather for a moment: the window refills a little
// later, long before the client runs out of work. nsqd gets the same
// effect by being slower to come back to its read; here it is a rule.

// finRateWindow is how long FINs are counted for before the rate is
// taken again.
const finRateWindow = 10 * time.Millisecond

// drainFactor: the reader waits only while the client holds at least this
// many times the wait's worth of messages at the rate it finishes them, so
// a wait never leaves it idle.
const drainFactor = 8

// quietLowWater is more than a 1 ms wait gathers at the fastest rate the
// rule waits for (2,500 held over eight waits: 21-byte FINs, 6.6 KB), and
// small enough that the kernel never grows the receive buffer for it. A
// wait that gathers more is signalled once, and only costs that wake-up.
const quietLowWater = 16 * 1024

// afterFIN lets the next FINs gather in the socket when the client holds
// enough messages not to miss them.
func (s *session) afterFIN() {
	if s.consumer == nil || s.r.Buffered() > 0 {
		return
	}
	// The FIN just read may not have left the count yet.
	held := max(s.consumer.InFlight()-1, 0)
	if d := s.finReads.wait(time.Now(), s.finishCount.Load(), held); d > 0 {
		setReadLowWater(s.conn, quietLowWater)
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.stopping:
			t.Stop()
		}
		// Back to 1 before reading, or a short command such as a lone
		// NOP would never be signalled.
		setReadLowWater(s.conn, 1)
	}
}

// finReads decides how long a consumer connection's reader waits before
// reading again after a read that ended on a FIN with nothing more
// buffered.
type finReads struct {
	delay time.Duration // 0: never wait

	since    time.Time // start of the window being counted
	finsThen int64     // FINs read before since
	rate     float64   // FINs a second over the last whole window; 0 before one
}

// wait is the pause before the next read, given the FINs the connection has
// read in all and the messages the client holds.
func (f *finReads) wait(now time.Time, fins, inFlight int64) time.Duration {
	if f.delay <= 0 {
		return 0
	}
	if f.since.IsZero() {
		f.since, f.finsThen = now, fins
		return 0
	}
	if took := now.Sub(f.since); took >= finRateWindow {
		f.rate = float64(fins-f.finsThen) / took.Seconds()
		f.since, f.finsThen = now, fins
	}
	if f.rate <= 0 {
		return 0
	}
	holds := time.Duration(float64(inFlight) / f.rate * float64(time.Second))
	if holds < drainFactor*f.delay {
		return 0
	}
	return f.delay
}
