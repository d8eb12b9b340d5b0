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
	a.Answered(4, time.Millisecond, t0)
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

func TestAdmissionCutsTheLimitOncePerSlowRoundTrip(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 1000, Min: 10, Backoff: 0.5})
	for range 10 {
		a.Admit(1)
	}
	// Ten answers of one slow round trip arrive together: one cut.
	for i := range 10 {
		a.Answered(1, 300*time.Millisecond, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if a.Limit() != 500 {
		t.Fatalf("limit %d after one slow round trip, want 500", a.Limit())
	}
	// A Target later, late answers cut again, down to Min and no further.
	now := t0
	for range 20 {
		now = now.Add(100 * time.Millisecond)
		a.Admit(1)
		a.Answered(1, 300*time.Millisecond, now)
	}
	if a.Limit() != 10 {
		t.Fatalf("limit %d after many slow round trips, want the minimum 10", a.Limit())
	}
	if c := a.Counts(); c.Cuts != 7 { // 1000 → 500 → 250 → 125 → 62 → 31 → 15 → 10
		t.Fatalf("%d cuts, want 7", c.Cuts)
	}
}

func TestAdmissionGrowsBackOnlyWhileTheLimitIsUsed(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 100, Min: 10, Backoff: 0.5})
	a.Admit(1)
	a.Answered(1, time.Second, t0) // 100 → 50
	// An idle node answering quickly does not grow a limit it never tests.
	for range 1000 {
		a.Admit(1)
		a.Answered(1, time.Millisecond, t0)
	}
	if a.Limit() != 50 {
		t.Fatalf("limit %d grew while at most one message was pending, want 50", a.Limit())
	}
	// A busy node answering promptly grows it, one message per limit's
	// worth answered, up to Max.
	for range 5000 {
		for a.Admit(1) {
		}
		a.Answered(1, time.Millisecond, t0)
	}
	if a.Limit() != 100 {
		t.Fatalf("limit %d after many prompt answers while busy, want the maximum 100", a.Limit())
	}
	before := a.Limit()
	a.Admit(1)
	a.Answered(1, time.Millisecond, t0)
	if a.Limit() != before {
		t.Fatal("the limit passed Max")
	}
}

func TestAdmissionWithoutATargetKeepsItsBound(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Max: 5})
	for range 5 {
		a.Admit(1)
	}
	a.Answered(1, time.Hour, t0)
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
	if _, ok := g.admit(1, nil); ok {
		t.Fatal("a publish past the gate's bound was taken")
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

// A node starts at Start rather than Max, so one that saturates before
// its first slow answer has not taken Max messages to answer late; while
// answers are prompt and the limit is used, it doubles each round trip up
// to Max, and once cut it grows back fast only to where it was cut.
func TestAdmissionStartsLowAndGrowsFastUntilTheFirstCut(t *testing.T) {
	a := NewAdmission(AdmissionConfig{Target: 100 * time.Millisecond, Max: 100_000, Min: 64})
	if a.Limit() != 1024 {
		t.Fatalf("starting limit %d, want 1024", a.Limit())
	}
	// A round trip: what is pending is answered, each answer making room
	// for the clients' next publishes.
	for a.Admit(1) {
	}
	roundTrip := func() {
		for range a.Pending() {
			a.Answered(1, time.Millisecond, t0)
			for a.Admit(1) {
			}
		}
	}
	roundTrip()
	if a.Limit() != 2048 {
		t.Fatalf("limit %d after one round trip of prompt answers, want it doubled to 2048", a.Limit())
	}
	for range 10 {
		roundTrip()
	}
	if a.Limit() != 100_000 {
		t.Fatalf("limit %d after eleven round trips, want Max", a.Limit())
	}
	a.Answered(1, time.Second, t0) // 100,000 → 80,000
	a.Answered(1, time.Second, t0.Add(time.Second))
	if a.Limit() != 64_000 {
		t.Fatalf("limit %d after two cuts, want 64000", a.Limit())
	}
	for range 1000 {
		a.Admit(1)
		a.Answered(1, time.Millisecond, t0)
	}
	if got := a.Limit(); got < 64_000 || got > 64_001 {
		t.Fatalf("limit %d after 1,000 prompt answers past the last cut, want it grown by about one message per limit's worth", got)
	}
}
