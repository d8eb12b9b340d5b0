package channel

import (
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

var delayCfg = Config{Name: "ch", ReqToEndThreshold: 15 * time.Minute}

// delayedCopy is the log message the partition writes for a move, placed
// after msgs.
func delayedCopy(msgs []storage.StoredMessage, channel string, mv DelayMove, id uint64) storage.StoredMessage {
	last := msgs[len(msgs)-1]
	m := storage.Message{ID: id, Timestamp: 2, DeliverAt: mv.DeliverAt, DelayedChannel: channel, DelayedOrigID: mv.ID, DelayedAttempts: mv.Attempts, Body: mv.Body}
	return storage.StoredMessage{Offset: last.Offset + int64(last.Size), Size: int32(storage.EncodedSize(&m)), Message: m}
}

// Behaviour 20 (docs/replication.md#delayed-copy): a REQ delayed beyond the
// threshold leaves memory for the log: the original is confirmed once its
// copy is committed, and the copy is delivered after the delay with a new
// ID, its attempts carried over. Days pass on an injected clock, not by
// sleeping.
func TestBehaviour20LongREQMovesToTheLog(t *testing.T) {
	c, msgs := newLoaded(t, 2, delayCfg, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	if c.MovesToLog(15*time.Minute) || !c.MovesToLog(15*time.Minute+time.Millisecond) {
		t.Fatal("the threshold itself should stay in memory and anything longer move")
	}
	mv, moving, err := c.ReqToLog(1, 1, 72*time.Hour, t0)
	if err != nil || !moving {
		t.Fatal(moving, err)
	}
	if mv.ID != 1 || mv.Attempts != 1 || mv.DeliverAt != t0.Add(72*time.Hour).UnixNano() || string(mv.Body) != "a" {
		t.Fatalf("move %+v", mv)
	}
	if st := c.Stats(); st.InFlight != 0 || st.Deferred != 1 || st.Confirmed != 0 {
		t.Fatalf("while the copy is written: %+v", st)
	}
	if err := c.Fin(1, 1); err == nil {
		t.Fatal("FIN of a moved message succeeded")
	}
	c.Moved(1)
	if st := c.Stats(); st.Confirmed != 40 || st.ConfirmedCount != 1 || st.Deferred != 0 {
		t.Fatalf("after the copy committed: %+v", st)
	}

	// The second message and the copy are read on; only the second is due.
	cp := delayedCopy(msgs, "ch", mv, 100)
	c.CommittedTo(cp.Offset+int64(cp.Size), 3)
	c.Loaded([]storage.StoredMessage{cp}, t0)
	if got := ids(c.Take(1, 10, t0, time.Minute)); len(got) != 1 || got[0] != 2 {
		t.Fatalf("took %v before the delay, want only 2", got)
	}
	if err := c.Fin(1, 2); err != nil {
		t.Fatal(err)
	}
	if !c.NextDue().Equal(time.Unix(0, mv.DeliverAt)) {
		t.Fatalf("next due %v, want the copy's time", c.NextDue())
	}
	if c.Tick(t0.Add(72*time.Hour - time.Second)); c.Available() != 0 {
		t.Fatal("delayed copy available a second early")
	}
	c.Tick(t0.Add(72 * time.Hour))
	serveBodies(t, c, cp)
	ds := c.Take(1, 10, t0.Add(72*time.Hour), time.Minute)
	if len(ds) != 1 || ds[0].ID != 100 || ds[0].Attempts != 2 || string(ds[0].Body) != "a" {
		t.Fatalf("after the delay took %+v, want the copy with ID 100 and attempt 2", ds)
	}
}

// serveBodies reads parked messages' bodies as the shell does, from log.
func serveBodies(t *testing.T, c *Core, log ...storage.StoredMessage) {
	t.Helper()
	for {
		off, size, ok := c.WantBody()
		if !ok {
			return
		}
		found := false
		for i := range log {
			if log[i].Offset == off && log[i].Size == size {
				c.BodyLoaded(&log[i])
				found = true
			}
		}
		if !found {
			t.Fatalf("body wanted at %d (%d bytes), not in the log", off, size)
		}
	}
}

// Messages due further ahead than the threshold are parked: held without
// their bodies and not counted against MaxOutstanding, so a channel full of
// messages delayed by days keeps delivering what is due now.
func TestParkedMessagesDoNotBlockReading(t *testing.T) {
	cfg := Config{Name: "ch", ReqToEndThreshold: time.Minute, MaxOutstanding: 3}
	var log []storage.StoredMessage
	off := int64(0)
	for i := range 10 {
		m := storage.Message{ID: uint64(i + 1), Timestamp: 1, DeliverAt: t0.Add(48 * time.Hour).UnixNano(), Body: []byte("later")}
		if i == 9 {
			m.DeliverAt, m.Body = 0, []byte("now")
		}
		sm := storage.StoredMessage{Offset: off, Size: int32(storage.EncodedSize(&m)), Message: m}
		log = append(log, sm)
		off += int64(sm.Size)
	}
	c := NewCore(cfg, storage.ChannelState{}, off, 10)
	for {
		from, _, ok := c.WantRead()
		if !ok {
			break
		}
		for i := range log {
			if log[i].Offset == from {
				c.Loaded(log[i:i+1], t0)
			}
		}
	}
	ds := c.Take(1, 10, t0, time.Minute)
	if len(ds) != 1 || string(ds[0].Body) != "now" {
		t.Fatalf("took %+v, want the message due now behind 9 parked ones", ds)
	}
	if st := c.Stats(); st.Deferred != 9 {
		t.Fatalf("stats %+v, want 9 deferred", st)
	}
	c.Fin(1, 10)
	if !c.NextDue().Equal(t0.Add(48 * time.Hour)) {
		t.Fatalf("next due %v, want the parked messages' time", c.NextDue())
	}
	later := t0.Add(48 * time.Hour)
	c.Tick(later)
	serveBodies(t, c, log...)
	if ds := c.Take(1, 10, later, time.Minute); len(ds) != 9 || string(ds[0].Body) != "later" {
		t.Fatalf("after the delay took %d messages", len(ds))
	}
}

// A restarted channel finds the copy in the log and still waits for its
// time: the delay survives restarts because it is only in the log.
func TestLongREQSurvivesRestart(t *testing.T) {
	c, msgs := newLoaded(t, 1, delayCfg, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	mv, _, _ := c.ReqToLog(1, 1, 48*time.Hour, t0)
	c.Moved(1)
	cp := delayedCopy(msgs, "ch", mv, 50)
	end := cp.Offset + int64(cp.Size)

	restarted := NewCore(delayCfg, c.State(), end, 2)
	from, _, ok := restarted.WantRead()
	if !ok || from != cp.Offset {
		t.Fatalf("restarted channel reads from %d (%v), want the copy at %d", from, ok, cp.Offset)
	}
	later := t0.Add(time.Hour)
	restarted.Loaded([]storage.StoredMessage{cp}, later)
	restarted.Tick(later)
	if restarted.Available() != 0 || restarted.Stats().Deferred != 1 {
		t.Fatalf("restarted channel: %+v", restarted.Stats())
	}
	restarted.Tick(t0.Add(48 * time.Hour))
	serveBodies(t, restarted, cp)
	if ds := restarted.Take(2, 1, t0.Add(48*time.Hour), time.Minute); len(ds) != 1 || ds[0].ID != 50 {
		t.Fatalf("took %+v", ds)
	}
}

// Another channel of the partition confirms a copy without delivering it.
func TestOtherChannelsSkipDelayedCopies(t *testing.T) {
	msgs := logOf(1)
	cp := delayedCopy(msgs, "ch", DelayMove{ID: 1, Body: []byte("a"), DeliverAt: t0.UnixNano()}, 9)
	end := cp.Offset + int64(cp.Size)
	other := NewCore(Config{Name: "other"}, storage.ChannelState{}, end, 2)
	other.Loaded(append(msgs, cp), t0)
	if got := ids(other.Take(1, 10, t0, time.Minute)); len(got) != 1 || got[0] != 1 {
		t.Fatalf("other channel took %v, want only the original", got)
	}
	other.Fin(1, 1)
	if st := other.Stats(); st.Confirmed != end || st.Depth != 0 {
		t.Fatalf("other channel %+v, want everything confirmed", st)
	}
}

// When the copy cannot be written the message waits in memory; short
// delays, ordered channels and unnamed (ephemeral) channels never move.
func TestDelayMoveFallsBackToMemory(t *testing.T) {
	c, _ := newLoaded(t, 1, delayCfg, storage.ChannelState{})
	c.Take(1, 1, t0, time.Minute)
	c.ReqToLog(1, 1, time.Hour, t0)
	c.MoveFailed(1)
	if st := c.Stats(); st.Deferred != 1 || st.Confirmed != 0 {
		t.Fatalf("after a failed move %+v", st)
	}
	c.Tick(t0.Add(time.Hour))
	if ds := c.Take(1, 1, t0.Add(time.Hour), time.Minute); len(ds) != 1 || ds[0].ID != 1 {
		t.Fatalf("took %+v", ds)
	}
	c.SetOrdered(true)
	if c.MovesToLog(time.Hour) {
		t.Fatal("ordered channel moves to the log")
	}
	if (&Core{cfg: Config{ReqToEndThreshold: time.Minute}}).MovesToLog(time.Hour) {
		t.Fatal("unnamed channel moves to the log")
	}
}

// deferredLog is n messages of the log, message i due at due[i] (0: now).
func deferredLog(due ...time.Duration) []storage.StoredMessage {
	msgs := logOf(len(due))
	for i, d := range due {
		if d > 0 {
			msgs[i].DeliverAt = t0.Add(d).UnixNano()
		}
	}
	return msgs
}

// youzan's /channel/emptydelayed: every deferred message, parked or in
// memory, REQ'd or published so, is confirmed and never delivered; what
// is due now is delivered as before.
func TestEmptyDeferredConfirmsWhatWaits(t *testing.T) {
	msgs := deferredLog(0, time.Minute, 48*time.Hour, 0)
	c := NewCore(delayCfg, storage.ChannelState{}, 160, 4)
	c.Loaded(msgs, t0)
	ds := c.Take(1, 10, t0, time.Hour)
	if got := ids(ds); len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Fatalf("took %v, want the two due now", got)
	}
	c.Req(1, 4, 30*time.Second, t0) // deferred by a REQ
	if n := c.EmptyDeferred(); n != 3 {
		t.Fatalf("emptied %d, want the REQ'd, the DPUB'd and the parked", n)
	}
	if err := c.Fin(1, 1); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if st.Deferred != 0 || st.Confirmed != 160 || st.ConfirmedCount != 4 || st.DeferredEmptied != 3 {
		t.Fatalf("after emptying and the FIN: %+v", st)
	}
	c.Tick(t0.Add(72 * time.Hour))
	if got := c.Take(1, 10, t0.Add(72*time.Hour), time.Hour); len(got) != 0 || !c.NextDue().IsZero() {
		t.Fatalf("delivered %v, next due %v after emptying", ids(got), c.NextDue())
	}
}

// youzan's /channel/requeuedelayed: what is due by the given time goes out
// now, parked messages once their bodies are read; later ones keep their
// time.
func TestDeferredDueNow(t *testing.T) {
	msgs := deferredLog(time.Minute, 48*time.Hour, 96*time.Hour)
	c := NewCore(delayCfg, storage.ChannelState{}, 120, 3)
	c.Loaded(msgs, t0)
	if n := c.DeferredDue(t0.Add(50 * time.Hour).UnixNano()); n != 2 {
		t.Fatalf("%d made due, want those due within 50 hours", n)
	}
	off, size, ok := c.WantBody()
	if !ok || off != 40 || size != 40 {
		t.Fatalf("WantBody %d %d %v, want the parked message's record", off, size, ok)
	}
	c.BodyLoaded(&msgs[1])
	if got := ids(c.Take(1, 10, t0, time.Hour)); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("took %v, want 1 and 2 now", got)
	}
	if st := c.Stats(); st.Deferred != 1 || !c.NextDue().Equal(t0.Add(time.Hour)) {
		t.Fatalf("deferred %d, next due %v: the third keeps its time", st.Deferred, c.NextDue())
	}
}
