package broker

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestAdmissionRefusesPastTheLimitAndTakesAgainOnceAnswered(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Max: 10, Min: 2})
	if !a.Admit(6) || !a.Admit(4) {
		t.Fatal("publishes within the limit refused")
	}
	if a.Admit(1) {
		t.Fatal("a publish past the limit was taken")
	}
	a.Answered(4, time.Millisecond, false, t0)
	if !a.Admit(3) {
		t.Fatal("a publish within the limit refused after answers gave room back")
	}
	if c := a.Counts(); c.Admitted != 13 || c.Refused != 1 {
		t.Fatalf("counts %+v, want 13 admitted and 1 refused", c)
	}
	if a.Pending() != 9 {
		t.Fatalf("pending %d, want 9", a.Pending())
	}
}

func TestAdmissionTakesAnMPUBLargerThanTheLimitWhenNothingIsPending(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Max: 10, Min: 2})
	if !a.Admit(200) {
		t.Fatal("a lone MPUB larger than the limit was refused: it could never be written")
	}
	if a.Admit(1) {
		t.Fatal("a publish was taken behind an MPUB already past the limit")
	}
}

// answerAll answers every pending message, one at a time, with latency,
// spread evenly over the span from at; it returns the end of the span.
func answerAll(a *Admission, latency time.Duration, at time.Time, span time.Duration) time.Time {
	n := a.Pending()
	for i := range n {
		a.Answered(1, latency, false, at.Add(span*time.Duration(i)/time.Duration(n)))
	}
	return at.Add(span)
}

// pipelined runs round trips of producers that pipeline: each answer,
// latency after its publish and settling or not, makes room for the
// next publishes, which take all the limit allows. It returns the time
// of the last answer.
func pipelined(a *Admission, roundTrips int, latency time.Duration, settling bool, now time.Time) time.Time {
	for a.Admit(1) {
	}
	for range roundTrips {
		for range a.Pending() {
			now = now.Add(10 * time.Microsecond)
			a.Answered(1, latency, settling, now)
			for a.Admit(1) {
			}
		}
	}
	return now
}

// A stall makes answers late and clears: the answers after it are prompt,
// the interval's shortest latency stays low, and the limit stays.
func TestAdmissionRidesOutAStall(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 1000, Min: 10})
	for range 500 {
		a.Admit(1)
	}
	// 500 publishes held up by a 300 ms fsync, answered together...
	for i := range 400 {
		a.Answered(1, 300*time.Millisecond-time.Duration(i)*time.Microsecond, false, t0.Add(time.Duration(i)*time.Microsecond))
	}
	// ...and the rest of the interval's answers prompt again.
	answerAll(a, time.Millisecond, t0.Add(50*time.Millisecond), 60*time.Millisecond)
	for range 20 {
		a.Admit(1)
	}
	answerAll(a, time.Millisecond, t0.Add(200*time.Millisecond), time.Millisecond)
	if a.Limit() != 1000 || a.Counts().Cuts != 0 {
		t.Fatalf("limit %d after %d cuts, want 1000 and none: a stall that clears is not a queue", a.Limit(), a.Counts().Cuts)
	}
}

// When even the quickest answers of an interval waited past the target, a
// queue stands that the node cannot work off: the limit drops to Backoff
// times what is pending, interval after interval while it lasts, never
// below Min.
func TestAdmissionCutsToWhatIsPendingOnAStandingQueue(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 10_000, Min: 10, Backoff: 0.5})
	for range 1000 {
		a.Admit(1)
	}
	now := t0
	for i := range 10 {
		now = now.Add(12 * time.Millisecond)
		a.Answered(1, 400*time.Millisecond+time.Duration(i), false, now)
	}
	if a.Limit() != 495 { // 0.5 × the 991 pending when the interval closed
		t.Fatalf("limit %d after an interval of late answers, want 495", a.Limit())
	}
	// The queue drains, every answer still late, and nothing new is
	// taken past the limit: it follows half of what is pending down, to
	// Min at the least.
	for a.Pending() > 0 {
		for range min(20, a.Pending()) {
			now = now.Add(6 * time.Millisecond)
			a.Answered(1, 300*time.Millisecond, false, now)
		}
		if a.Pending() >= a.Limit() && a.Admit(1) {
			t.Fatalf("a publish taken with %d pending past the limit %d", a.Pending()-1, a.Limit())
		}
		if a.Limit() > 10 && float64(a.Limit()) > 0.5*float64(a.Pending()+20)+1 {
			t.Fatalf("limit %d with %d pending, want at most half of what was pending at the last cut", a.Limit(), a.Pending())
		}
	}
	if a.Limit() != 10 {
		t.Fatalf("limit %d after a standing queue drained, want the minimum 10", a.Limit())
	}
}

// One slow publish on a quiet node is no queue: an interval needs a few
// answers before its shortest latency counts.
func TestAdmissionIgnoresAFewSlowAnswers(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 1000, Min: 10})
	now := t0
	for range 50 {
		now = now.Add(time.Second)
		a.Admit(1)
		a.Answered(1, 500*time.Millisecond, false, now)
	}
	if a.Limit() != 1000 {
		t.Fatalf("limit %d after slow answers one at a time, want 1000", a.Limit())
	}
}

// Once cut, answers within the target grow the limit back while the node
// uses at least half of it: doubling each round trip up to where it was
// cut, by one message per limit's worth above, to Max at most. An idle
// node does not grow a limit it never tests.
func TestAdmissionGrowsBackWhileTheLimitIsUsed(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 4000, Min: 10, Backoff: 0.5})
	for range 2000 {
		a.Admit(1)
	}
	now := answerAll(a, 300*time.Millisecond, t0, 200*time.Millisecond)
	if a.Limit() != 500 || a.Counts().Cuts != 1 {
		t.Fatalf("limit %d after %d cuts, want one cut, to half the 1,000 pending when the interval closed", a.Limit(), a.Counts().Cuts)
	}
	a.cutTo(100) // and another, far down, without moving where growth slows
	a.grown = 500
	now = t0.Add(300 * time.Millisecond)
	for range 1000 {
		now = now.Add(100 * time.Microsecond)
		a.Admit(1)
		a.Answered(1, time.Millisecond, false, now)
	}
	if a.Limit() != 100 {
		t.Fatalf("limit %d grew while at most one message was pending, want 100", a.Limit())
	}
	// Answers 40 ms after their publish: within the target, but not far
	// below it, so growth past the last cut is careful.
	roundTrip := func() { now = pipelined(a, 1, 40*time.Millisecond, false, now) }
	roundTrip()
	if a.Limit() != 200 {
		t.Fatalf("limit %d after a round trip of prompt answers, want it doubled to 200", a.Limit())
	}
	roundTrip()
	roundTrip()
	if a.Limit() != 500 {
		t.Fatalf("limit %d after three round trips, want where it was cut, 500", a.Limit())
	}
	for range 30 {
		roundTrip()
	}
	if got := a.Limit(); got < 525 || got > 535 {
		t.Fatalf("limit %d after 30 more round trips, want about one message more each", got)
	}
	// Fifty intervals without a cut: the overload is over, and the limit
	// doubles each round trip up to Max again.
	now = now.Add(5 * time.Second)
	for range 6 {
		roundTrip()
	}
	if a.Limit() != 4000 {
		t.Fatalf("limit %d five seconds after the last cut and six round trips, want Max", a.Limit())
	}
}

// A limit cut by a burst that has passed grows back fast once answers
// come far below the target (within a quarter of it), past the last cut
// too: a few prompt round trips, not fifty intervals of one message
// each, bring it back.
func TestAdmissionRegrowsFastOnAnswersFarBelowTheTarget(t *testing.T) {
	for _, tc := range []struct {
		latency time.Duration
		fast    bool
	}{{time.Millisecond, true}, {25 * time.Millisecond, true}, {26 * time.Millisecond, false}, {90 * time.Millisecond, false}} {
		a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 4000, Min: 64, Backoff: 0.5})
		for range 1000 {
			a.Admit(1)
		}
		now := answerAll(a, 300*time.Millisecond, t0, 200*time.Millisecond)
		if a.Limit() != 250 || a.Counts().Cuts != 1 {
			t.Fatalf("limit %d after %d cuts, want one cut to 250", a.Limit(), a.Counts().Cuts)
		}
		pipelined(a, 4, tc.latency, false, now)
		if fast := a.Limit() == 4000; fast != tc.fast {
			t.Errorf("answers %v after their publish: limit %d after four round trips from 250, want Max %v", tc.latency, a.Limit(), tc.fast)
		}
		if !tc.fast && a.Limit() > 260 {
			t.Errorf("answers %v after their publish: limit %d, want about one message more each round trip", tc.latency, a.Limit())
		}
	}
}

func TestAdmissionWithoutATargetKeepsItsBound(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Max: 5})
	for range 5 {
		a.Admit(1)
	}
	a.Answered(1, time.Hour, false, t0)
	if a.Limit() != 5 {
		t.Fatalf("limit %d moved without a latency target, want 5", a.Limit())
	}
}

// A gate refuses at once with E_PUB_TOO_MUCH_WAITING and gives the
// messages back when the publish it took is answered.
func TestAdmissionGateGivesBackOnAnswer(t *testing.T) {
	g := newAdmissionGate(AdmissionConfig{Max: 2, Min: 1})
	var answered int
	r1, ok1 := g.admit(2, func(r topic.Reply) { answered++ })
	if !ok1 {
		t.Fatal("first publish refused")
	}
	var refusal *topic.Error
	if _, ok := g.admit(1, func(r topic.Reply) { refusal = r.Err }); ok || refusal != topic.ErrTooMuchWaiting {
		t.Fatalf("a publish past the gate's bound: taken %v, answered %v, want refused with E_PUB_TOO_MUCH_WAITING", ok, refusal)
	}
	r1(topic.Reply{})
	if answered != 1 {
		t.Fatal("the wrapped reply did not answer")
	}
	if st := g.state(); st.Pending != 0 || st.Refused != 1 || st.Admitted != 2 {
		t.Fatalf("state %+v, want nothing pending, 1 refused, 2 admitted", st)
	}
	if _, ok := (*admissionGate)(nil).admit(1_000_000, nil); !ok {
		t.Fatal("a nil gate refused")
	}
}

// A node that just took over partitions answers their first writes late,
// all at once: their followers are turning to the new leader. Those
// settling answers give their messages back but are no queue, so the
// limit stays; the same latencies not settling cut it. Prompt settling
// answers grow a limit cut before, as any prompt answers do: a producer
// that publishes once to each of thousands of new leaderships gets
// nothing but settling answers.
func TestAdmissionReadsNoQueueInSettlingAnswers(t *testing.T) {
	for _, settling := range []bool{true, false} {
		a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 10_000, Min: 10, Backoff: 0.5})
		for range 1000 {
			a.Admit(1)
		}
		now := t0
		for range 20 {
			now = now.Add(12 * time.Millisecond)
			a.Answered(1, 400*time.Millisecond, settling, now)
		}
		if cut := a.Limit() < 10_000; cut == settling {
			t.Errorf("settling %v: limit %d after 20 answers 400 ms late", settling, a.Limit())
		}
		if a.Pending() != 980 {
			t.Errorf("settling %v: %d pending after 20 of 1,000 answered", settling, a.Pending())
		}
	}
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 4000, Min: 64})
	a.cutTo(64)
	pipelined(a, 4, 2*time.Millisecond, true, t0)
	if a.Limit() != 1024 {
		t.Fatalf("limit %d after four round trips of prompt settling answers from 64, want it doubled each: 1024", a.Limit())
	}
}
