package channel

import "time"

// upkeep is when a channel saves its state and tells its partition where it
// has confirmed to, for the followers. Like Core it holds no clock: the
// shell tells it what changed and when, and keeps one timer for the earlier
// of NextDeadline and Core.NextDue. A channel that changed nothing since it
// last saved and reported has no deadline, so an idle channel arms no timer.
type upkeep struct {
	persistEvery time.Duration // a change is saved, and fully reported, within this
	offsetEvery  time.Duration // a moved confirmed offset is reported within this
	// phase, in [0, 1), brings each deadline forward by that share of
	// half its interval. Thousands of channels that changed together (a
	// consumer catching up on every partition of a node) would otherwise
	// all save at the same moment: thousands of timers firing at once,
	// each a goroutine and an actor run, queue in front of everything
	// else the node runs, its lease renewals and heartbeats included.
	// Channels with phases spread over [0, 1) spread their saves over
	// the second half of the interval.
	phase float64

	unsaved   bool      // state changed since it was last saved
	owed      bool      // confirmed state changed since the last full report
	persistAt time.Time // when to save and report in full; zero when neither is owed
	offsetAt  time.Time // when to report a moved confirmed offset; zero when none moved
}

func newUpkeep(persistEvery, offsetEvery time.Duration) upkeep {
	return upkeep{persistEvery: persistEvery, offsetEvery: offsetEvery}
}

// newPhasedUpkeep is newUpkeep with its deadlines brought forward by
// phase (in [0, 1)) of half their intervals.
func newPhasedUpkeep(persistEvery, offsetEvery time.Duration, phase float64) upkeep {
	u := newUpkeep(persistEvery, offsetEvery)
	u.phase = min(max(phase, 0), 1)
	return u
}

// after is the deadline of a change at now that must be handled within
// every.
func (u *upkeep) after(now time.Time, every time.Duration) time.Time {
	return now.Add(every - time.Duration(u.phase*float64(every/2)))
}

// Unsaved: state that is saved but not replicated changed (a follower
// applied its leader's offset, the channel was paused).
func (u *upkeep) Unsaved(now time.Time) {
	u.unsaved = true
	u.persistSoon(now)
}

// Unreported: the followers may not hold the confirmed state (the channel
// just started where this replica had it): it is reported in full within
// persistEvery.
func (u *upkeep) Unreported(now time.Time) {
	u.owed = true
	u.persistSoon(now)
}

// Confirmed: the confirmed state changed, and something else carries the
// new offset to the followers now (an ordered FIN): it is saved and
// reported in full within persistEvery.
func (u *upkeep) Confirmed(now time.Time) {
	u.unsaved = true
	u.Unreported(now)
}

// Moved: the confirmed state changed. It is saved and reported in full
// within persistEvery, and the new offset reported within offsetEvery.
func (u *upkeep) Moved(now time.Time) {
	u.Confirmed(now)
	if u.offsetAt.IsZero() {
		u.offsetAt = u.after(now, u.offsetEvery)
	}
}

func (u *upkeep) persistSoon(now time.Time) {
	if u.persistAt.IsZero() {
		u.persistAt = u.after(now, u.persistEvery)
	}
}

// Saved: the state was written out of turn (an empty, a setoffset, a
// flushed offset); only a full report may still be owed.
func (u *upkeep) Saved() {
	u.unsaved = false
	if !u.owed {
		u.persistAt = time.Time{}
	}
}

// Due says what has fallen due at now, and takes it as done.
func (u *upkeep) Due(now time.Time) (save, fullReport, offsetReport bool) {
	if !u.persistAt.IsZero() && !now.Before(u.persistAt) {
		save, fullReport = u.unsaved, u.owed
		u.unsaved, u.owed, u.persistAt = false, false, time.Time{}
	}
	if !u.offsetAt.IsZero() && !now.Before(u.offsetAt) {
		offsetReport = true
		u.offsetAt = time.Time{}
	}
	return save, fullReport, offsetReport
}

// NextDeadline is when something next falls due, zero when nothing is owed.
func (u *upkeep) NextDeadline() time.Time {
	return earliest(u.persistAt, u.offsetAt)
}

// earliest is the earliest of the given times, zero ones meaning "none";
// zero when all are.
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}
