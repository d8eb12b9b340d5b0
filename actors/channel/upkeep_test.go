package channel

import (
	"testing"
	"time"
)

type due struct{ save, full, offset bool }

func dueAt(u *upkeep, now time.Time) due {
	s, f, o := u.Due(now)
	return due{s, f, o}
}

// Nothing changed: nothing is due, ever.
func TestUpkeepIdleHasNoDeadline(t *testing.T) {
	u := newUpkeep(2*time.Second, 50*time.Millisecond)
	if d := u.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v with nothing changed", d)
	}
	if got := dueAt(&u, t0.Add(time.Hour)); got != (due{}) {
		t.Fatalf("due %+v with nothing changed", got)
	}
}

// A moved offset is reported within offsetEvery, then saved and reported in
// full within persistEvery of the first change; after that nothing is due
// until the next change.
func TestUpkeepMovedOffset(t *testing.T) {
	u := newUpkeep(2*time.Second, 50*time.Millisecond)
	u.Moved(t0)
	u.Moved(t0.Add(10 * time.Millisecond)) // a second FIN waits for the same report
	if d := u.NextDeadline(); !d.Equal(t0.Add(50 * time.Millisecond)) {
		t.Fatalf("deadline %v, want the offset report at +50ms", d)
	}
	if got := dueAt(&u, t0.Add(49*time.Millisecond)); got != (due{}) {
		t.Fatalf("due %+v before the deadline", got)
	}
	if got := dueAt(&u, t0.Add(50*time.Millisecond)); got != (due{offset: true}) {
		t.Fatalf("due %+v at +50ms, want the offset report only", got)
	}
	if d := u.NextDeadline(); !d.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("deadline %v, want the save at +2s", d)
	}
	if got := dueAt(&u, t0.Add(2*time.Second)); got != (due{save: true, full: true}) {
		t.Fatalf("due %+v at +2s, want save and full report", got)
	}
	if d := u.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v after everything was done", d)
	}
}

// A state saved out of turn leaves only the full report owed; a state that
// is not replicated is only saved.
func TestUpkeepSavedAndUnsaved(t *testing.T) {
	u := newUpkeep(time.Second, 50*time.Millisecond)
	u.Confirmed(t0)
	u.Saved()
	if got := dueAt(&u, t0.Add(time.Second)); got != (due{full: true}) {
		t.Fatalf("due %+v, want the full report only", got)
	}

	u.Unsaved(t0.Add(2 * time.Second))
	if d := u.NextDeadline(); !d.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("deadline %v, want the save at +3s", d)
	}
	u.Saved()
	if d := u.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v after the only change was saved", d)
	}

	u.Unsaved(t0.Add(4 * time.Second))
	if got := dueAt(&u, t0.Add(5*time.Second)); got != (due{save: true}) {
		t.Fatalf("due %+v, want the save only", got)
	}

	u.Unreported(t0.Add(6 * time.Second))
	u.Saved()
	if got := dueAt(&u, t0.Add(7*time.Second)); got != (due{full: true}) {
		t.Fatalf("due %+v, want the full report only", got)
	}
	if d := u.NextDeadline(); !d.IsZero() {
		t.Fatalf("deadline %v after everything was done", d)
	}
}

// A phased upkeep brings its deadlines forward by its phase of half their
// intervals, never past them: channels that changed together save and
// report spread over the second half of the interval, each within it.
func TestPhasedUpkeepSpreadsDeadlinesWithinTheInterval(t *testing.T) {
	for _, tc := range []struct {
		phase          float64
		persist, offst time.Duration
	}{
		{0, 2 * time.Second, 50 * time.Millisecond},
		{0.5, 1500 * time.Millisecond, 37500 * time.Microsecond},
		{0.999, 1001 * time.Millisecond, 25025 * time.Microsecond},
		{-1, 2 * time.Second, 50 * time.Millisecond}, // out of range: clamped
	} {
		u := newPhasedUpkeep(2*time.Second, 50*time.Millisecond, tc.phase)
		u.Moved(t0)
		if d := u.NextDeadline(); !d.Equal(t0.Add(tc.offst)) {
			t.Fatalf("phase %v: first deadline %v, want the offset report at +%v", tc.phase, d.Sub(t0), tc.offst)
		}
		if got := dueAt(&u, t0.Add(tc.offst)); got != (due{offset: true}) {
			t.Fatalf("phase %v: due %+v at +%v, want the offset report", tc.phase, got, tc.offst)
		}
		if d := u.NextDeadline(); !d.Equal(t0.Add(tc.persist)) {
			t.Fatalf("phase %v: deadline %v, want the save at +%v", tc.phase, d.Sub(t0), tc.persist)
		}
		if got := dueAt(&u, t0.Add(tc.persist-time.Nanosecond)); got != (due{}) {
			t.Fatalf("phase %v: due %+v before the save's deadline", tc.phase, got)
		}
		if got := dueAt(&u, t0.Add(tc.persist)); got != (due{save: true, full: true}) {
			t.Fatalf("phase %v: due %+v at +%v, want save and full report", tc.phase, got, tc.persist)
		}
	}
}

// Channels' phases spread over [0, 1): a node's thousand channels of one
// topic do not share a few.
func TestChannelPhasesSpread(t *testing.T) {
	tenths := map[int]int{}
	for p := range int32(1000) {
		ph := phaseOf(Options{Topic: "wide", Partition: p, Name: "check"})
		if ph < 0 || ph >= 1 {
			t.Fatalf("phase %v of partition %d outside [0, 1)", ph, p)
		}
		tenths[int(ph*10)]++
	}
	for i := range 10 {
		if tenths[i] < 50 || tenths[i] > 150 {
			t.Fatalf("phases by tenth %v: want about 100 in each", tenths)
		}
	}
}
