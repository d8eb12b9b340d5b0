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
