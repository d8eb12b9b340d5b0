package channel

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

var t0 = time.Unix(1_700_000_000, 0)

// logOf builds n stored messages of 40 bytes each, IDs 1..n.
func logOf(n int) []storage.StoredMessage {
	out := make([]storage.StoredMessage, n)
	for i := range out {
		out[i] = storage.StoredMessage{Offset: int64(40 * i), Size: 40, Message: storage.Message{ID: uint64(i + 1), Timestamp: 1, Body: []byte{byte('a' + i)}}}
	}
	return out
}

func newLoaded(t *testing.T, n int, cfg Config, st storage.ChannelState) (*Core, []storage.StoredMessage) {
	t.Helper()
	msgs := logOf(n)
	c := NewCore(cfg, st, int64(40*n), int64(n))
	from, to, ok := c.WantRead()
	if !ok || to != int64(40*n) {
		t.Fatalf("WantRead %d %d %v", from, to, ok)
	}
	c.Loaded(msgs[from/40:], t0)
	return c, msgs
}

func ids(ds []Delivery) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestTakeRespectsCountAndOrder(t *testing.T) {
	c, _ := newLoaded(t, 5, Config{}, storage.ChannelState{})
	ds := c.Take(1, 3, t0, time.Minute)
	if got := ids(ds); len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Fatalf("took %v", got)
	}
	for _, d := range ds {
		if d.Attempts != 1 {
			t.Fatalf("attempts %d", d.Attempts)
		}
	}
	st := c.Stats()
	if st.InFlight != 3 || st.Depth != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Behaviour 17 (docs/replication.md#contiguous-confirm): confirmed advances
// only over a contiguous run of FINs; reading pauses while too many are
// outstanding (TestReadAheadAndOutstandingBounds).
func TestBehaviour17ConfirmedOnlyOverContiguousFINs(t *testing.T) {
	cases := []struct {
		name          string
		fins          []uint64
		wantConfirmed int64
		wantCount     int64
		wantGaps      int
	}{
		{"in order", []uint64{1, 2, 3}, 120, 3, 0},
		{"gap at the start", []uint64{2, 3}, 0, 0, 1},
		{"gap filled", []uint64{2, 3, 1}, 120, 3, 0},
		{"two gaps", []uint64{2, 4}, 0, 0, 2},
		{"middle gap", []uint64{1, 3, 4}, 40, 1, 1},
		{"reverse", []uint64{4, 3, 2, 1}, 160, 4, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := newLoaded(t, 4, Config{}, storage.ChannelState{})
			c.Take(1, 4, t0, time.Minute)
			for _, id := range tc.fins {
				if err := c.Fin(1, id); err != nil {
					t.Fatalf("FIN %d: %v", id, err)
				}
			}
			st := c.State()
			if st.Confirmed != tc.wantConfirmed || st.ConfirmedCount != tc.wantCount || len(st.Intervals) != tc.wantGaps {
				t.Fatalf("state %+v", st)
			}
		})
	}
}

func TestFinRefusals(t *testing.T) {
	c, _ := newLoaded(t, 2, Config{}, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	if err := c.Fin(2, 1); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("FIN by another consumer: %v", err)
	}
	if err := c.Fin(1, 2); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("FIN of an undelivered message: %v", err)
	}
	if err := c.Fin(1, 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Fin(1, 1); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("second FIN: %v", err)
	}
}

func TestReqRedeliversWithNextAttempt(t *testing.T) {
	c, _ := newLoaded(t, 2, Config{}, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	if err := c.Req(1, 1, 0, t0); err != nil {
		t.Fatal(err)
	}
	ds := c.Take(2, 1, t0, time.Minute)
	if len(ds) != 1 || ds[0].ID != 1 || ds[0].Attempts != 2 {
		t.Fatalf("redelivery %+v: a requeued message goes before unread ones", ds)
	}
	if c.Stats().RequeueCount != 1 {
		t.Fatalf("requeue count %d", c.Stats().RequeueCount)
	}
}

func TestReqWithDelayDefers(t *testing.T) {
	c, _ := newLoaded(t, 1, Config{}, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	if err := c.Req(1, 1, 10*time.Second, t0); err != nil {
		t.Fatal(err)
	}
	if c.Available() != 0 || c.Stats().Deferred != 1 {
		t.Fatalf("deferred message available: %+v", c.Stats())
	}
	if due := c.NextDue(); !due.Equal(t0.Add(10 * time.Second)) {
		t.Fatalf("next due %v", due)
	}
	c.Tick(t0.Add(9 * time.Second))
	if c.Available() != 0 {
		t.Fatal("released early")
	}
	c.Tick(t0.Add(10 * time.Second))
	if ds := c.Take(1, 1, t0, time.Minute); len(ds) != 1 || ds[0].Attempts != 2 {
		t.Fatalf("after delay: %+v", ds)
	}
}

func TestTimeoutRequeuesAndReleasesWindow(t *testing.T) {
	c, _ := newLoaded(t, 3, Config{}, storage.ChannelState{})
	c.Take(7, 2, t0, time.Second)
	c.Take(8, 1, t0.Add(500*time.Millisecond), time.Second)
	released := c.Tick(t0.Add(time.Second))
	if released[7] != 2 || released[8] != 0 {
		t.Fatalf("released %v", released)
	}
	if st := c.Stats(); st.TimeoutCount != 2 || st.InFlight != 1 || c.Available() != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := c.Fin(7, 1); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("late FIN: %v", err)
	}
}

func TestTouchExtendsUpToMaxMsgTimeout(t *testing.T) {
	c, _ := newLoaded(t, 1, Config{MaxMsgTimeout: 3 * time.Second}, storage.ChannelState{})
	c.Take(1, 1, t0, time.Second)
	if err := c.Touch(1, 1, t0.Add(900*time.Millisecond), time.Second); err != nil {
		t.Fatal(err)
	}
	if len(c.Tick(t0.Add(1500*time.Millisecond))) != 0 {
		t.Fatal("timed out despite TOUCH")
	}
	c.Touch(1, 1, t0.Add(2500*time.Millisecond), time.Second)
	if due := c.NextDue(); !due.Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("due %v, want capped at delivery + 3s", due)
	}
	if err := c.Touch(2, 1, t0, time.Second); !errors.Is(err, ErrNotOwner) {
		t.Fatalf("touch by another consumer: %v", err)
	}
}

func TestDeferredPublishWaitsForItsTime(t *testing.T) {
	msgs := logOf(2)
	msgs[0].DeliverAt = t0.Add(time.Second).UnixNano()
	c := NewCore(Config{}, storage.ChannelState{}, 80, 2)
	c.Loaded(msgs, t0)
	if ds := c.Take(1, 2, t0, time.Minute); len(ds) != 1 || ds[0].ID != 2 {
		t.Fatalf("took %v", ids(ds))
	}
	if c.Stats().Deferred != 1 {
		t.Fatal("not deferred")
	}
	c.Tick(t0.Add(time.Second))
	if ds := c.Take(1, 2, t0, time.Minute); len(ds) != 1 || ds[0].ID != 1 || ds[0].Attempts != 1 {
		t.Fatalf("after delay %+v", ds)
	}
}

// A restart starts from the saved state: confirmed messages and FINished
// ranges beyond it are not delivered again.
func TestRestartSkipsFinished(t *testing.T) {
	c, msgs := newLoaded(t, 5, Config{}, storage.ChannelState{})
	c.Take(1, 5, t0, time.Minute)
	for _, id := range []uint64{1, 3, 5} {
		c.Fin(1, id)
	}
	st := c.State()

	again := NewCore(Config{}, st, 200, 5)
	from, _, ok := again.WantRead()
	if !ok || from != 40 {
		t.Fatalf("restart reads from %d", from)
	}
	again.Loaded(msgs[1:], t0)
	if got := ids(again.Take(1, 5, t0, time.Minute)); len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("redelivered %v, want [2 4]", got)
	}
	again.Fin(1, 2)
	again.Fin(1, 4)
	if s := again.State(); s.Confirmed != 200 || s.ConfirmedCount != 5 || len(s.Intervals) != 0 {
		t.Fatalf("state %+v", s)
	}
}

func TestReadAheadAndOutstandingBounds(t *testing.T) {
	c := NewCore(Config{MaxReadAhead: 2, MaxOutstanding: 3}, storage.ChannelState{}, 400, 10)
	msgs := logOf(10)
	c.Loaded(msgs[:2], t0)
	if _, _, ok := c.WantRead(); ok {
		t.Fatal("reads beyond the read-ahead bound")
	}
	c.Take(1, 2, t0, time.Minute)
	c.Loaded(msgs[2:3], t0)
	c.Take(1, 1, t0, time.Minute)
	if _, _, ok := c.WantRead(); ok {
		t.Fatal("reads with three unconfirmed messages outstanding")
	}
	c.Fin(1, 1)
	if from, _, ok := c.WantRead(); !ok || from != 120 {
		t.Fatalf("after FIN: %d %v", from, ok)
	}
}

func TestEmptyDropsEverything(t *testing.T) {
	c, _ := newLoaded(t, 4, Config{}, storage.ChannelState{})
	c.Take(1, 2, t0, time.Minute)
	c.Take(2, 1, t0, time.Minute)
	released := c.Empty()
	if released[1] != 2 || released[2] != 1 {
		t.Fatalf("released %v", released)
	}
	st := c.Stats()
	if st.Depth != 0 || st.InFlight != 0 || st.Confirmed != 160 || c.Available() != 0 {
		t.Fatalf("after empty %+v", st)
	}
	c.CommittedTo(200, 5)
	if from, _, ok := c.WantRead(); !ok || from != 160 {
		t.Fatalf("reads from %d after new commits", from)
	}
}

func TestPauseStopsDelivery(t *testing.T) {
	c, _ := newLoaded(t, 2, Config{}, storage.ChannelState{})
	c.SetPaused(true)
	if c.Available() != 0 || len(c.Take(1, 2, t0, time.Minute)) != 0 {
		t.Fatal("paused channel delivered")
	}
	if !c.State().Paused {
		t.Fatal("pause not in the saved state")
	}
	c.SetPaused(false)
	if len(c.Take(1, 2, t0, time.Minute)) != 2 {
		t.Fatal("unpaused channel did not deliver")
	}
}

func TestNothingBeyondTheCommittedEnd(t *testing.T) {
	c := NewCore(Config{}, storage.ChannelState{}, 0, 0)
	if _, _, ok := c.WantRead(); ok {
		t.Fatal("reads with nothing committed")
	}
	c.CommittedTo(80, 2)
	if _, to, ok := c.WantRead(); !ok || to != 80 {
		t.Fatalf("reads to %d", to)
	}
}

func TestIntervalsMerge(t *testing.T) {
	var s intervals
	for _, iv := range []interval{{10, 20, 1}, {30, 40, 1}, {20, 30, 1}, {50, 60, 1}, {40, 50, 1}} {
		s.add(iv)
	}
	if s.len() != 1 || s.first() != (interval{10, 60, 5}) {
		t.Fatalf("intervals %+v", s.items)
	}
	if !s.covers(10) || !s.covers(59) || s.covers(60) || s.covers(9) {
		t.Fatal("covers")
	}
}

func TestConsumerWindow(t *testing.T) {
	var c Consumer
	if c.reserve(5) != 0 {
		t.Fatal("reserved with RDY 0")
	}
	c.SetRDY(3)
	c.starved.Store(false) // the session woke every channel
	if got := c.reserve(5); got != 3 || !c.Full() {
		t.Fatalf("reserved %d", got)
	}
	if c.release(1) {
		t.Fatal("room no channel waited for woke the others")
	}
	if got := c.reserve(5); got != 1 {
		t.Fatalf("reserved %d of the one slot given back", got)
	}
	if c.reserve(1) != 0 {
		t.Fatal("reserved past RDY")
	}
	if !c.release(1) {
		t.Fatal("room given back after a channel found the window full did not wake the others")
	}
	if c.release(1) {
		t.Fatal("one wait woke the others twice")
	}
}

func TestAttemptsSaturate(t *testing.T) {
	c, _ := newLoaded(t, 1, Config{}, storage.ChannelState{})
	var last uint16
	for i := 0; i < 70000; i++ {
		ds := c.Take(1, 1, t0, time.Minute)
		if len(ds) != 1 {
			t.Fatalf("delivery %d missing", i)
		}
		if ds[0].Attempts < last {
			t.Fatalf("attempts went from %d to %d", last, ds[0].Attempts)
		}
		last = ds[0].Attempts
		c.Req(1, ds[0].ID, 0, t0)
	}
	if last != math.MaxUint16 {
		t.Fatalf("attempts %d", last)
	}
}

func TestApplyOffsetOnFollower(t *testing.T) {
	cases := []struct {
		name      string
		start     int64
		u         OffsetUpdate
		moved     bool
		confirmed int64
	}{
		{"forward", 40, OffsetUpdate{Offset: 120, Count: 3}, true, 120},
		{"backward refused", 120, OffsetUpdate{Offset: 40, Count: 1}, false, 120},
		{"backward allowed", 120, OffsetUpdate{Offset: 40, Count: 1, AllowBackward: true}, true, 40},
		{"beyond the end ignored", 40, OffsetUpdate{Offset: 400, Count: 10}, false, 40},
		{"beyond the end clamped on flush", 40, OffsetUpdate{Offset: 400, Count: 10, Flush: true}, true, 160},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCore(Config{}, storage.ChannelState{Confirmed: tc.start, ConfirmedCount: tc.start / 40}, 160, 4)
			if moved := c.ApplyOffset(tc.u); moved != tc.moved {
				t.Fatalf("moved %v", moved)
			}
			st := c.State()
			if st.Confirmed != tc.confirmed || st.ConfirmedCount != tc.confirmed/40 {
				t.Fatalf("state %+v, want confirmed %d", st, tc.confirmed)
			}
			if from, _, ok := c.WantRead(); tc.confirmed < 160 && (!ok || from != tc.confirmed) {
				t.Fatalf("reader at %d, want %d", from, tc.confirmed)
			}
		})
	}
}

func TestApplyOffsetReplacesIntervals(t *testing.T) {
	c := NewCore(Config{}, storage.ChannelState{}, 200, 5)
	c.ApplyOffset(OffsetUpdate{Offset: 40, Count: 1, ReplaceIntervals: true, Intervals: []storage.Interval{{Start: 80, End: 120, Count: 1}}})
	if st := c.State(); st.Confirmed != 40 || len(st.Intervals) != 1 || st.Intervals[0].Start != 80 {
		t.Fatalf("state %+v", st)
	}
	c.ApplyOffset(OffsetUpdate{Offset: 120, Count: 3})
	if st := c.State(); len(st.Intervals) != 0 {
		t.Fatalf("intervals below confirmed kept: %+v", st)
	}
}

// Behaviour 19 (docs/replication.md#ordered-channel): an ordered channel has
// at most one message in flight, redelivers it first, and ignores a REQ
// delay.
func TestBehaviour19OrderedOneAtATime(t *testing.T) {
	c, _ := newLoaded(t, 3, Config{}, storage.ChannelState{})
	c.SetOrdered(true)
	ds := c.Take(1, 10, t0, time.Minute)
	if len(ds) != 1 || ds[0].ID != 1 {
		t.Fatalf("took %v, want only the first message", ids(ds))
	}
	if more := c.Take(2, 10, t0, time.Minute); len(more) != 0 {
		t.Fatalf("second message in flight: %v", ids(more))
	}
	if err := c.Req(1, 1, time.Hour, t0); err != nil {
		t.Fatal(err)
	}
	if c.Stats().Deferred != 0 {
		t.Fatal("ordered channel deferred a message")
	}
	ds = c.Take(1, 10, t0, time.Minute)
	if len(ds) != 1 || ds[0].ID != 1 || ds[0].Attempts != 2 {
		t.Fatalf("after REQ: %+v, want message 1 again", ds)
	}
	c.Fin(1, 1)
	if ds := c.Take(1, 10, t0, time.Minute); len(ds) != 1 || ds[0].ID != 2 {
		t.Fatalf("after FIN: %v", ids(ds))
	}
}

// A message FINished never goes out again, even when the cursor was put
// back before it while it was in flight: a leader moved away and back
// within milliseconds takes the brief leader's full report as a follower,
// which puts its cursor at the reported position with the message still
// in flight to a consumer that stayed connected. Its FIN then confirms the
// message, and the read from the cursor must not deliver it again (the
// fault suite saw an ordered consumer get a message twice in a row with
// its FIN confirmed between).
func TestFinishedMessageNotReadAgainFromACursorPutBackBeforeIt(t *testing.T) {
	c, msgs := newLoaded(t, 3, Config{}, storage.ChannelState{})
	c.SetOrdered(true)
	if ds := c.Take(1, 1, t0, time.Minute); len(ds) != 1 || ds[0].ID != 1 {
		t.Fatalf("took %v, want message 1", ids(ds))
	}
	// The brief leader had not seen the FIN: its report names the start.
	c.ApplyOffset(OffsetUpdate{Offset: 0, Count: 0, Flush: true, AllowBackward: true})
	if err := c.Fin(1, 1); err != nil {
		t.Fatal(err)
	}
	if st := c.State(); st.Confirmed != 40 {
		t.Fatalf("confirmed %d after the FIN of the first message, want 40", st.Confirmed)
	}
	from, _, ok := c.WantRead()
	if !ok {
		t.Fatal("nothing to read after the cursor was put back")
	}
	c.Loaded(msgs[from/40:], t0)
	if ds := c.Take(1, 1, t0, time.Minute); len(ds) != 1 || ds[0].ID != 2 {
		t.Fatalf("after the FIN of message 1 took %v, want message 2", ids(ds))
	}
	if st := c.Stats(); st.Depth != 1 {
		t.Fatalf("depth %d with message 2 in flight and 3 to come, want 1", st.Depth)
	}
}

// An offset beyond the follower's data is kept and applied when the data
// is committed here.
func TestApplyOffsetCachedUntilDataArrives(t *testing.T) {
	c := NewCore(Config{}, storage.ChannelState{}, 80, 2)
	if c.ApplyOffset(OffsetUpdate{Offset: 160, Count: 4}) {
		t.Fatal("moved beyond its data")
	}
	c.CommittedTo(120, 3)
	if st := c.State(); st.Confirmed != 0 {
		t.Fatalf("applied before the data arrived: %+v", st)
	}
	c.CommittedTo(160, 4)
	if st := c.State(); st.Confirmed != 160 || st.ConfirmedCount != 4 {
		t.Fatalf("cached offset not applied: %+v", st)
	}
}

// An offset a follower kept for data it did not have yet is dropped when
// its log is cut: it named a position in the log that went away, and
// applied to the log that replaces it would skip messages.
func TestCachedOffsetDroppedWhenTheLogIsCut(t *testing.T) {
	c := NewCore(Config{}, storage.ChannelState{}, 100, 4)
	if c.ApplyOffset(OffsetUpdate{Offset: 300, Count: 12}) {
		t.Fatal("an offset beyond the end moved the channel")
	}
	c.TruncatedTo(80, 3)
	c.CommittedTo(400, 16) // another leader's records, past where the offset was
	if st := c.State(); st.Confirmed != 0 {
		t.Fatalf("confirmed %d after the cut: the stale offset was applied", st.Confirmed)
	}
}

// A consumer that unsubscribes gives back what it had in flight: the
// messages go first to the next consumer, in log order, one attempt more,
// and its FIN of one of them afterwards is refused.
func TestGoneConsumerGivesItsMessagesBack(t *testing.T) {
	c, _ := newLoaded(t, 5, Config{}, storage.ChannelState{})
	c.Take(1, 2, t0, time.Minute)
	c.Take(2, 1, t0, time.Minute)
	c.Take(1, 1, t0, time.Minute)
	if n := c.Gone(1, t0); n != 3 {
		t.Fatalf("consumer 1 gave back %d, want 3", n)
	}
	if st := c.Stats(); st.InFlight != 1 {
		t.Fatalf("in flight after consumer 1 left: %+v, want consumer 2's one", st)
	}
	if err := c.Fin(1, 1); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("FIN by the gone consumer: %v", err)
	}
	ds := c.Take(2, 5, t0, time.Minute)
	if got := ids(ds); !slices.Equal(got, []uint64{1, 2, 4, 5}) {
		t.Fatalf("consumer 2 then took %v, want 1 2 4 (given back) and 5", got)
	}
	for _, d := range ds[:3] {
		if d.Attempts != 2 {
			t.Fatalf("message %d given back delivered with attempts %d, want 2", d.ID, d.Attempts)
		}
	}
	if n := c.Gone(1, t0); n != 0 {
		t.Fatalf("gone twice: %d", n)
	}
}

// What a gone consumer held goes back only where the channel's position
// still wants it: a setoffset past it confirmed it, and one back before it
// has the cursor read it again, so it is delivered once, not twice.
func TestGoneConsumerAfterASetoffset(t *testing.T) {
	c, _ := newLoaded(t, 5, Config{}, storage.ChannelState{})
	c.Take(1, 2, t0, time.Minute) // 1 and 2 in flight
	c.SetPosition(120, 3)         // past both: the next is 4
	if n := c.Gone(1, t0); n != 2 {
		t.Fatalf("gave back %d", n)
	}
	if got := ids(c.Take(2, 5, t0, time.Minute)); len(got) != 0 {
		t.Fatalf("after a setoffset past them, consumer 2 got %v; want nothing before the log is read again", got)
	}

	c, msgs := newLoaded(t, 5, Config{}, storage.ChannelState{})
	c.Take(1, 3, t0, time.Minute) // 1, 2 and 3 in flight
	c.SetPosition(0, 0)           // back to the start, the cursor too
	c.Gone(1, t0)
	from, _, ok := c.WantRead()
	if !ok || from != 0 {
		t.Fatalf("WantRead %d %v after the setoffset", from, ok)
	}
	c.Loaded(msgs, t0)
	if got := ids(c.Take(2, 10, t0, time.Minute)); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("after a setoffset back, consumer 2 got %v; want each message once", got)
	}
}

// A message that leaves flight by timing out or by a REQ, kept in memory
// or copied to the log, after a setoffset moved the channel, goes the same way as a
// gone consumer's: not at all when the channel moved past it, and only
// through the cursor when it moved back before it, so each is delivered
// once more, not twice.
func TestGivenBackAfterASetoffset(t *testing.T) {
	giveBack := map[string]func(c *Core){
		"timeout": func(c *Core) {
			if n := c.Tick(t0.Add(2 * time.Minute))[1]; n != 3 {
				t.Fatalf("timed out %d, want 3", n)
			}
		},
		"REQ": func(c *Core) {
			for id := uint64(1); id <= 3; id++ {
				if err := c.Req(1, id, 0, t0); err != nil {
					t.Fatalf("REQ %d: %v", id, err)
				}
			}
		},
		"deferred REQ": func(c *Core) {
			for id := uint64(1); id <= 3; id++ {
				if err := c.Req(1, id, time.Second, t0); err != nil {
					t.Fatalf("REQ %d: %v", id, err)
				}
			}
			c.Tick(t0.Add(2 * time.Second))
		},
		"REQ to the log": func(c *Core) {
			for id := uint64(1); id <= 3; id++ {
				_, moving, err := c.ReqToLog(1, id, time.Hour, t0)
				if err != nil {
					t.Fatalf("REQ %d to the log: %v", id, err)
				}
				if moving {
					t.Fatalf("REQ %d to the log after a setoffset: a copy would deliver it again", id)
				}
			}
			c.Tick(t0.Add(2 * time.Hour))
		},
	}
	for name, back := range giveBack {
		t.Run(name, func(t *testing.T) {
			cfg := Config{Name: "ch", ReqToEndThreshold: time.Minute}
			c, _ := newLoaded(t, 5, cfg, storage.ChannelState{})
			c.Take(1, 3, t0, time.Minute) // 1, 2 and 3 in flight
			c.SetPosition(160, 4)         // past them: the next is 5
			back(c)
			if got := ids(c.Take(2, 10, t0.Add(3*time.Hour), time.Minute)); len(got) != 0 {
				t.Fatalf("after a setoffset past them, consumer 2 got %v; want nothing before the log is read again", got)
			}

			c, msgs := newLoaded(t, 5, cfg, storage.ChannelState{})
			c.Take(1, 3, t0, time.Minute)
			c.SetPosition(40, 1) // back before 2 and 3, past 1
			back(c)
			from, _, ok := c.WantRead()
			if !ok || from != 40 {
				t.Fatalf("WantRead %d %v after the setoffset", from, ok)
			}
			c.Loaded(msgs[1:], t0)
			if got := ids(c.Take(2, 10, t0.Add(3*time.Hour), time.Minute)); !slices.Equal(got, []uint64{2, 3, 4, 5}) {
				t.Fatalf("after a setoffset back, consumer 2 got %v; want 2 to 5, each once", got)
			}
		})
	}
}

// A REQ's copy to the log that fails after a setoffset moved the channel
// leaves the message where the position wants it, as a REQ kept in memory.
func TestFailedMoveAfterASetoffset(t *testing.T) {
	for _, back := range []bool{false, true} {
		cfg := Config{Name: "ch", ReqToEndThreshold: time.Minute}
		c, msgs := newLoaded(t, 5, cfg, storage.ChannelState{})
		c.Take(1, 3, t0, time.Minute)
		for id := uint64(1); id <= 3; id++ {
			if _, moving, err := c.ReqToLog(1, id, time.Hour, t0); err != nil || !moving {
				t.Fatalf("REQ %d to the log: %v %v", id, moving, err)
			}
		}
		want := []uint64{}
		if back {
			c.SetPosition(40, 1) // back before 2 and 3, past 1
			want = []uint64{2, 3, 4, 5}
		} else {
			c.SetPosition(160, 4) // past them
		}
		for id := uint64(1); id <= 3; id++ {
			c.MoveFailed(id)
		}
		c.Tick(t0.Add(2 * time.Hour))
		if back {
			c.Loaded(msgs[1:], t0)
		}
		if got := ids(c.Take(2, 10, t0.Add(3*time.Hour), time.Minute)); !slices.Equal(got, want) {
			t.Fatalf("setoffset back %v: consumer 2 got %v, want %v", back, got, want)
		}
	}
}

// A skipped channel drops what it holds, in flight too, and every message
// committed while it stays skipped; unskipped, it delivers what comes after.
func TestSkipDropsWhatArrivesUntilUnskipped(t *testing.T) {
	c, _ := newLoaded(t, 4, Config{}, storage.ChannelState{})
	c.Take(1, 2, t0, time.Minute)
	released := c.SetSkipped(true)
	if released[1] != 2 {
		t.Fatalf("released %v, want consumer 1's two in flight", released)
	}
	c.CommittedTo(200, 5)
	st := c.Stats()
	if st.Depth != 0 || st.InFlight != 0 || st.Confirmed != 200 || st.ConfirmedCount != 5 || !st.Skipped {
		t.Fatalf("skipped, after a commit: %+v", st)
	}
	if _, _, ok := c.WantRead(); ok || len(c.Take(1, 2, t0, time.Minute)) != 0 {
		t.Fatal("a skipped channel reads or delivers")
	}
	if c.SetSkipped(false) != nil || c.Skipped() {
		t.Fatal("unskipping dropped something")
	}
	c.CommittedTo(240, 6)
	if from, _, ok := c.WantRead(); !ok || from != 200 {
		t.Fatalf("unskipped, reads from %d (%v), want the commit after the skip, 200", from, ok)
	}
}

// An operator finishes a message by its ID where it waits: requeued, or
// read ahead; one the channel does not hold is refused.
func TestFinWaitingFinishesWhereTheMessageWaits(t *testing.T) {
	c, msgs := newLoaded(t, 3, Config{}, storage.ChannelState{})
	first := c.Take(1, 1, t0, time.Minute)[0]
	if err := c.Req(1, first.ID, 0, t0); err != nil {
		t.Fatal(err)
	}
	if _, held := c.Holder(first.ID); held {
		t.Fatal("a requeued message is held")
	}
	if err := c.FinWaiting(first.ID); err != nil {
		t.Fatalf("finishing the requeued message: %v", err)
	}
	if err := c.FinWaiting(msgs[1].ID); err != nil {
		t.Fatalf("finishing a message read ahead: %v", err)
	}
	if st := c.Stats(); st.Confirmed != 80 || st.ConfirmedCount != 2 || st.Depth != 1 {
		t.Fatalf("after finishing the first two: %+v", st)
	}
	if got := c.Take(1, 3, t0, time.Minute); len(got) != 1 || got[0].ID != msgs[2].ID {
		t.Fatalf("delivered %+v, want only the third", got)
	}
	if consumer, held := c.Holder(msgs[2].ID); !held || consumer != 1 {
		t.Fatalf("holder of the third: %d %v", consumer, held)
	}
	if err := c.FinWaiting(msgs[2].ID); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("FinWaiting of a message in flight: %v, want ErrNotInFlight (it is Fin's)", err)
	}
	if err := c.FinWaiting(12345); !errors.Is(err, ErrNotInFlight) {
		t.Fatalf("an unknown ID: %v", err)
	}
}

// youzan's /channel/ratelimit: delivery spends the bytes it sends from a
// bucket of four seconds' worth and waits, NextDue naming when, until the
// bucket holds the next message; lifting the limit delivers the rest.
func TestRateLimitHoldsDeliveryToItsBytesASecond(t *testing.T) {
	msgs := make([]storage.StoredMessage, 8)
	for i := range msgs {
		msgs[i] = storage.StoredMessage{Offset: int64(2000 * i), Size: 2000, Message: storage.Message{ID: uint64(i + 1), Body: make([]byte, 1024)}}
	}
	c := NewCore(Config{}, storage.ChannelState{}, 16000, 8)
	c.Loaded(msgs, t0)
	c.SetRateLimit(1, t0) // 1 KB a second: four 1 KB messages at once
	if got := len(c.Take(1, 10, t0, time.Hour)); got != 4 {
		t.Fatalf("took %d at once, want the bucket's four", got)
	}
	if due := c.NextDue(); !due.Equal(t0.Add(time.Second)) {
		t.Fatalf("next due %v, want a second later", due.Sub(t0))
	}
	if !c.RateHeld(t0.Add(999 * time.Millisecond)) {
		t.Fatal("not held before the bucket holds a message")
	}
	if got := len(c.Take(1, 10, t0.Add(999*time.Millisecond), time.Hour)); got != 0 {
		t.Fatalf("took %d before the bucket held a message", got)
	}
	if c.RateHeld(t0.Add(time.Second)) {
		t.Fatal("held once the bucket holds a message")
	}
	if got := len(c.Take(1, 10, t0.Add(2*time.Second), time.Hour)); got != 2 {
		t.Fatalf("took %d two seconds on, want two", got)
	}
	c.SetRateLimit(1, t0.Add(3*time.Second)) // repeated: no refill
	if got := len(c.Take(1, 10, t0.Add(2500*time.Millisecond), time.Hour)); got != 0 {
		t.Fatalf("the same limit again refilled the bucket: took %d", got)
	}
	st := c.Stats()
	if st.RateLimitKB != 1 || st.RateLimited != 2 {
		t.Fatalf("stats %+v, want the limit and two waits", st)
	}
	c.SetRateLimit(0, t0.Add(3*time.Second))
	if got := len(c.Take(1, 10, t0.Add(3*time.Second), time.Hour)); got != 2 || !c.NextDue().Equal(t0.Add(time.Hour)) {
		t.Fatalf("unlimited: took %d, next due %v", got, c.NextDue())
	}
}

// A message larger than the bucket goes out once the bucket is full, and
// its debt holds the next one back.
func TestRateLimitLetsALargeMessageGoWhenTheBucketIsFull(t *testing.T) {
	big := storage.StoredMessage{Offset: 0, Size: 9000, Message: storage.Message{ID: 1, Body: make([]byte, 8192)}}
	small := storage.StoredMessage{Offset: 9000, Size: 200, Message: storage.Message{ID: 2, Body: make([]byte, 100)}}
	c := NewCore(Config{}, storage.ChannelState{}, 9200, 2)
	c.Loaded([]storage.StoredMessage{big, small}, t0)
	c.SetRateLimit(1, t0)
	if got := ids(c.Take(1, 10, t0, time.Hour)); len(got) != 1 || got[0] != 1 {
		t.Fatalf("took %v, want the large message alone", got)
	}
	// 4096 - 8192 leaves a debt of 4096 bytes; 100 more are needed.
	want := t0.Add(time.Duration(math.Ceil(4196 * float64(time.Second) / 1024)))
	if due := c.NextDue(); !due.Equal(want) {
		t.Fatalf("next due %v, want %v", due.Sub(t0), want.Sub(t0))
	}
	if got := ids(c.Take(1, 10, want, time.Hour)); len(got) != 1 || got[0] != 2 {
		t.Fatalf("took %v when due, want the small one", got)
	}
}

// youzan's /channel/setclientlimit: a consumer's cap is that of the
// longest prefix its client ID or its remote address starts with.
func TestClientLimitOfTheLongestMatchingPrefix(t *testing.T) {
	c := NewCore(Config{}, storage.ChannelState{}, 0, 0)
	c.SetClientLimits([]ClientLimit{{"10.0.", 3}, {"web", 5}, {"web-slow", 0}})
	for _, tc := range []struct {
		id, addr string
		ready    int64
		ok       bool
	}{
		{"web-1", "192.168.1.2:5000", 5, true},
		{"web-slow-1", "192.168.1.2:5000", 0, true},
		{"batch", "10.0.3.4:5000", 3, true},
		{"web-1", "10.0.3.4:5000", 3, true}, // "10.0." is the longer
		{"batch", "192.168.1.2:5000", 0, false},
	} {
		if ready, ok := c.ClientLimit(tc.id, tc.addr); ready != tc.ready || ok != tc.ok {
			t.Errorf("%s at %s: %d %v, want %d %v", tc.id, tc.addr, ready, ok, tc.ready, tc.ok)
		}
	}
}

// A client limit caps the window under RDY; the window reopening under the
// cap, after a channel found it full, is reported, so the other
// partitions' channels are woken.
func TestConsumerWindowUnderAClientLimit(t *testing.T) {
	var c Consumer
	c.SetRDY(10)
	c.setLimit(2, true)
	if got := c.reserve(5); got != 2 || !c.Full() {
		t.Fatalf("reserved %d under a cap of 2", got)
	}
	if got := c.reserve(1); got != 0 {
		t.Fatalf("reserved %d past the cap", got)
	}
	if !c.release(1) {
		t.Fatal("the window reopening under the cap was not reported")
	}
	c.setLimit(0, true)
	if c.reserve(5) != 0 || c.SetRDY(10) {
		t.Fatal("a cap of 0 let a message through")
	}
	c.setLimit(0, false)
	if got := c.reserve(20); got != 9 {
		t.Fatalf("reserved %d with the cap lifted, want RDY's 9 left", got)
	}
}

// max_attempts N (docs/replication.md#dead-letters): a message is
// delivered at most N times; the REQ of its Nth delivery makes it dead,
// handed out to be published, never available again, and the publish's
// acknowledgement confirms it as a FIN would.
func TestDeadAfterTheLastDelivery(t *testing.T) {
	c, _ := newLoaded(t, 2, Config{}, storage.ChannelState{})
	c.SetMaxAttempts(3)
	for i := 1; i <= 3; i++ {
		ds := c.Take(1, 1, t0, time.Minute)
		if len(ds) != 1 || ds[0].ID != 1 || ds[0].Attempts != uint16(i) {
			t.Fatalf("delivery %d: %+v", i, ds)
		}
		if len(c.DeadLetters()) != 0 {
			t.Fatalf("dead before its last delivery was given back (delivery %d)", i)
		}
		if err := c.Req(1, 1, 0, t0.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	dead := c.DeadLetters()
	if len(dead) != 1 || dead[0].ID != 1 || dead[0].Attempts != 3 || string(dead[0].Body) != "a" ||
		dead[0].RequeuedAt != t0.Add(3*time.Second).UnixNano() || dead[0].Offset != 0 {
		t.Fatalf("dead letters %+v", dead)
	}
	if len(c.DeadLetters()) != 0 {
		t.Fatal("a dead letter handed out twice")
	}
	if ds := c.Take(1, 5, t0, time.Minute); len(ds) != 1 || ds[0].ID != 2 {
		t.Fatalf("after the dead message: %v, want message 2 only", ids(ds))
	}
	if st := c.Stats(); st.Confirmed != 0 || st.DeadLettering != 1 || st.Depth != 0 {
		t.Fatalf("before the publish is acknowledged: %+v", st)
	}
	if got := c.StateOf(MessageStateRequested{Offset: 0, ID: 1}); got.State != StateDeadLettering || got.Attempts != 3 {
		t.Fatalf("/message/get of the dead message: %+v", got)
	}
	to := DeadLetterPlace{Topic: "t.dead", Partition: 0, ID: 9}
	if !c.DeadLettered(1, to) || c.DeadLettered(1, to) {
		t.Fatal("DeadLettered took the dead letter other than once")
	}
	if st := c.Stats(); st.Confirmed != 40 || st.DeadLettered != 1 || st.DeadLettering != 0 {
		t.Fatalf("after the publish: %+v", st)
	}
	if got := c.StateOf(MessageStateRequested{Offset: 0, ID: 1}); got.State != StateConfirmed || got.DeadLetter == nil || *got.DeadLetter != to {
		t.Fatalf("/message/get after: %+v", got)
	}
}

// A timeout of the last delivery, and a consumer gone with it, make a
// message dead as its REQ does; without max_attempts nothing is ever dead.
func TestDeadOnTimeoutAndOnAGoneConsumer(t *testing.T) {
	c, _ := newLoaded(t, 2, Config{}, storage.ChannelState{})
	c.SetMaxAttempts(1)
	c.Take(1, 1, t0, time.Second)
	c.Take(2, 1, t0, time.Minute)
	if released := c.Tick(t0.Add(time.Second)); released[1] != 1 {
		t.Fatalf("released %v", released)
	}
	if n := c.Gone(2, t0.Add(2*time.Second)); n != 1 {
		t.Fatalf("gone gave back %d", n)
	}
	dead := c.DeadLetters()
	if len(dead) != 2 || dead[0].ID != 1 || dead[0].RequeuedAt != t0.Add(time.Second).UnixNano() || dead[1].ID != 2 {
		t.Fatalf("dead letters %+v", dead)
	}
	if c.Available() != 0 || c.Stats().TimeoutCount != 1 {
		t.Fatalf("after: available %d, %+v", c.Available(), c.Stats())
	}

	c, _ = newLoaded(t, 1, Config{}, storage.ChannelState{})
	for range 10 {
		c.Take(1, 1, t0, time.Minute)
		c.Req(1, 1, 0, t0)
	}
	if len(c.DeadLetters()) != 0 || c.Available() != 1 {
		t.Fatal("a message died without max_attempts")
	}
}

// A dead letter whose publish failed stays dead and is handed out again
// after deadLetterRetry, with the channel's timer due then.
func TestFailedDeadLetterIsRetried(t *testing.T) {
	c, _ := newLoaded(t, 1, Config{}, storage.ChannelState{})
	c.SetMaxAttempts(1)
	c.Take(1, 1, t0, time.Minute)
	c.Req(1, 1, 0, t0)
	c.DeadLetters()
	if n := c.DeadLetterFailed(1, t0); n != 1 {
		t.Fatalf("first failure counted %d", n)
	}
	if due := c.NextDue(); !due.Equal(t0.Add(deadLetterRetry)) {
		t.Fatalf("next due %v, want the retry", due)
	}
	c.Tick(t0.Add(deadLetterRetry - time.Millisecond))
	if len(c.DeadLetters()) != 0 {
		t.Fatal("retried early")
	}
	c.Tick(t0.Add(deadLetterRetry))
	dead := c.DeadLetters()
	if len(dead) != 1 || dead[0].ID != 1 || dead[0].RequeuedAt != t0.UnixNano() {
		t.Fatalf("retry %+v", dead)
	}
	if c.Available() != 0 || c.Stats().Confirmed != 0 {
		t.Fatal("a failed dead letter came back or was confirmed")
	}
	c.DeadLettered(1, DeadLetterPlace{Topic: "t.dead"})
	if c.Stats().Confirmed != 40 {
		t.Fatalf("confirmed %d", c.Stats().Confirmed)
	}
}

// On an ordered channel a poison message holds the partition until its
// dead letter is published: the next message is delivered then, not
// before.
func TestOrderedChannelGoesOnAfterItsDeadLetter(t *testing.T) {
	c, _ := newLoaded(t, 3, Config{}, storage.ChannelState{})
	c.SetOrdered(true)
	c.SetMaxAttempts(2)
	for range 2 {
		if ds := c.Take(1, 10, t0, time.Minute); len(ds) != 1 || ds[0].ID != 1 {
			t.Fatalf("took %v", ids(ds))
		}
		c.Req(1, 1, 0, t0)
	}
	if ds := c.Take(1, 10, t0, time.Minute); len(ds) != 0 {
		t.Fatalf("delivered %v while the dead message is not published", ids(ds))
	}
	c.DeadLetters()
	c.DeadLetterFailed(1, t0)
	if ds := c.Take(1, 10, t0, time.Minute); len(ds) != 0 {
		t.Fatalf("delivered %v while the dead message waits for its retry", ids(ds))
	}
	c.Tick(t0.Add(deadLetterRetry))
	c.DeadLetters()
	c.DeadLettered(1, DeadLetterPlace{Topic: "t.dead"})
	if ds := c.Take(1, 10, t0, time.Minute); len(ds) != 1 || ds[0].ID != 2 || ds[0].Attempts != 1 {
		t.Fatalf("after the dead letter: %+v, want message 2", ds)
	}
}

// At most deadLettersInFlight dead letters are handed out unanswered; a
// long REQ of a last delivery makes it dead, not a delayed copy; an
// emptied channel forgets its dead messages, and a late answer finds
// nothing.
func TestDeadLettersBoundedAndDroppedByEmpty(t *testing.T) {
	n := deadLettersInFlight + 8
	c, _ := newLoaded(t, n, Config{ReqToEndThreshold: time.Minute, Name: "ch"}, storage.ChannelState{})
	c.SetMaxAttempts(1)
	ds := c.Take(1, n, t0, time.Minute)
	if _, moving, err := c.ReqToLog(1, ds[0].ID, time.Hour, t0); err != nil || moving {
		t.Fatalf("long REQ of a last delivery: moving %v, %v", moving, err)
	}
	for _, d := range ds[1:] {
		c.Req(1, d.ID, 0, t0)
	}
	first := c.DeadLetters()
	if len(first) != deadLettersInFlight || first[0].ID != 1 || len(c.DeadLetters()) != 0 {
		t.Fatalf("handed out %d, then more", len(first))
	}
	c.DeadLettered(first[0].ID, DeadLetterPlace{Topic: "t.dead"})
	if next := c.DeadLetters(); len(next) != 1 || next[0].ID != uint64(deadLettersInFlight+1) {
		t.Fatalf("after one answer: %+v", next)
	}
	c.Empty()
	if c.DeadLettered(first[1].ID, DeadLetterPlace{Topic: "t.dead"}) || len(c.DeadLetters()) != 0 || c.Stats().DeadLettering != 0 {
		t.Fatal("an emptied channel kept its dead messages")
	}
	if c.Stats().Confirmed != int64(40*n) {
		t.Fatalf("confirmed %d", c.Stats().Confirmed)
	}
}

// A rate limit past what the bucket's bytes can count (its kilobytes, and
// four seconds' worth of them, as bytes beyond an int64) limits nothing
// any real one would not: it delivers, rather than a bucket wrapped
// negative holding every message back with a due time in the past.
func TestRateLimitBeyondCountingDelivers(t *testing.T) {
	msgs := []storage.StoredMessage{{Offset: 0, Size: 200, Message: storage.Message{ID: 1, Body: make([]byte, 100)}}}
	for _, kb := range []int64{1 << 53, math.MaxInt64} {
		c := NewCore(Config{}, storage.ChannelState{}, 200, 1)
		c.Loaded(msgs, t0)
		c.SetRateLimit(kb, t0)
		if c.RateHeld(t0) {
			t.Errorf("%d KB/s: held back", kb)
		}
		if got := len(c.Take(1, 10, t0.Add(time.Millisecond), time.Hour)); got != 1 {
			t.Errorf("%d KB/s: took %d, want the message", kb, got)
		}
	}
}
