package topic

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

func dedupeWriter(window time.Duration, maxEntries int) *Writer {
	w := NewWriter(WriterConfig{Partition: 1, Epoch: 1, Replicas: 1}, Position{})
	w.SetDedupe(DedupeConfig{Window: window, MaxEntries: maxEntries})
	return w
}

// offerIDs offers one message per ID at now; the reply, if answered at once.
func offerIDs(w *Writer, token string, now time.Time, ids ...string) *Reply {
	b := make([][]byte, len(ids))
	for i, id := range ids {
		b[i] = []byte("body-" + id)
	}
	return w.Offer(Publish{Bodies: b, IDs: ids, Token: token, ReceivedAt: now})
}

// writeAll writes and commits what waits, on a single node; its replies.
func writeAll(t *testing.T, w *Writer, now time.Time) ([]Reply, []*Write) {
	t.Helper()
	var out []Reply
	var writes []*Write
	for wr := w.NextWrite(now); wr != nil; wr = w.NextWrite(now) {
		writes = append(writes, wr)
		out = append(out, stored(w, w.LocalWritten(wr.Record.LogID, nil))...)
	}
	return out, writes
}

// stored is what the shell answers for r once its commits are on disk:
// its replies, then those of the publishes parked on their IDs.
func stored(w *Writer, r Ready) []Reply {
	if r.unpark {
		return append(r.Replies, w.unpark()...)
	}
	return r.Replies
}

func TestDedupeAnswersACommittedDuplicateAsTheFirst(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	if r := offerIDs(w, "a", t0, "x"); r != nil {
		t.Fatalf("first refused: %+v", r)
	}
	first, _ := writeAll(t, w, t0)
	equalTokens(t, first, "a")
	r := offerIDs(w, "b", t0.Add(time.Second), "x")
	if r == nil {
		t.Fatal("duplicate queued for a write")
	}
	want := first[0]
	// Answered at once, it waited for no leadership to settle.
	want.Token, want.Settling = "b", false
	if *r != want {
		t.Fatalf("duplicate answered %+v, want the first's %+v", *r, want)
	}
	if w.NextWrite(t0.Add(time.Second)) != nil {
		t.Fatal("duplicate written")
	}
	if d := w.Dedupe(); d.Entries() != 1 || d.Hits() != 1 {
		t.Fatalf("entries %d hits %d, want 1 and 1", d.Entries(), d.Hits())
	}
}

func TestDedupeDuplicateWaitsForTheFirstInFlight(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	wr := w.NextWrite(t0)
	if r := offerIDs(w, "b", t0, "x"); r != nil {
		t.Fatalf("duplicate of a write in flight answered at once: %+v", r)
	}
	if w.NextWrite(t0) != nil || w.Idle() {
		t.Fatal("duplicate queued for a write, or forgotten")
	}
	replies := stored(w, w.LocalWritten(wr.Record.LogID, nil))
	equalTokens(t, replies, "a", "b")
	a, b := replies[0], replies[1]
	if b.Err != nil || b.MsgID != a.MsgID || b.Offset != a.Offset || b.Size != a.Size || b.FirstID != a.FirstID {
		t.Fatalf("duplicate answered %+v, first %+v", b, a)
	}
	if !w.Idle() {
		t.Fatal("not idle after both answered")
	}
}

func TestDedupeRetryOfAFailedFirstIsWritten(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	wr := w.NextWrite(t0)
	offerIDs(w, "b", t0, "x")
	r := w.LocalWritten(wr.Record.LogID, errors.New("disk full"))
	equalTokens(t, r.Replies, "a")
	if r.Replies[0].Err == nil {
		t.Fatal("failed write answered OK")
	}
	replies, writes := writeAll(t, w, t0)
	equalTokens(t, replies, "b")
	if len(writes) != 1 || replies[0].Err != nil {
		t.Fatalf("retry not written: %d writes, %+v", len(writes), replies)
	}
	if r := offerIDs(w, "c", t0, "x"); r == nil || r.MsgID != replies[0].MsgID {
		t.Fatalf("third publish answered %+v, want the retry's message %d", r, replies[0].MsgID)
	}
}

func TestDedupeDuplicatesOfAStepDownAreRefused(t *testing.T) {
	w := NewWriter(WriterConfig{Partition: 1, Epoch: 1, Followers: []string{"n2", "n3"}, Replicas: 3, WriteTimeout: time.Second}, Position{})
	w.SetDedupe(DedupeConfig{Window: time.Minute})
	offerIDs(w, "a", t0, "x")
	wr := w.NextWrite(t0)
	w.LocalWritten(wr.Record.LogID, nil)
	offerIDs(w, "b", t0, "x")
	r := w.Tick(t0.Add(2 * time.Second))
	equalTokens(t, r.Replies, "a", "b")
	for _, rep := range r.Replies {
		if rep.Err == nil {
			t.Fatalf("answered OK after the write failed: %+v", rep)
		}
	}
}

func TestDedupeForgetsPastTheWindow(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	writeAll(t, w, t0)
	later := t0.Add(time.Minute + time.Millisecond)
	if r := offerIDs(w, "b", later, "x"); r != nil {
		t.Fatalf("publish past the window answered as a duplicate: %+v", r)
	}
	if _, writes := writeAll(t, w, later); len(writes) != 1 {
		t.Fatal("publish past the window not written")
	}
}

func TestDedupeCapForgetsTheOldestFirst(t *testing.T) {
	w := dedupeWriter(time.Hour, 2)
	for i, id := range []string{"x", "y", "z"} {
		offerIDs(w, id, t0.Add(time.Duration(i)), id)
		writeAll(t, w, t0.Add(time.Duration(i)))
	}
	if n := w.Dedupe().Entries(); n != 2 {
		t.Fatalf("%d entries, want the cap 2", n)
	}
	if r := offerIDs(w, "x2", t0, "x"); r != nil {
		t.Fatal("the oldest ID is still remembered past the cap")
	}
	if r := offerIDs(w, "z2", t0, "z"); r == nil {
		t.Fatal("the newest ID is forgotten")
	}
}

func TestDedupeBatchWritesOnlyItsNewMessages(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x", "y")
	first, _ := writeAll(t, w, t0)
	if r := offerIDs(w, "retry", t0, "x", "y"); r == nil || r.MsgID != first[0].MsgID || r.Size != first[0].Size || r.Offset != first[0].Offset {
		t.Fatalf("whole batch retried answered %+v, want the first's %+v", r, first[0])
	}
	if r := offerIDs(w, "mixed", t0, "x", "z", "z"); r != nil {
		t.Fatalf("batch with a new message answered at once: %+v", r)
	}
	replies, writes := writeAll(t, w, t0)
	if len(writes) != 1 || writes[0].Record.MsgNum != 1 {
		t.Fatalf("mixed batch wrote %+v, want only z once", writes)
	}
	equalTokens(t, replies, "mixed")
	if got := w.Dedupe().Hits(); got != 4 {
		t.Fatalf("%d hits, want 4 (x, y, x, the second z)", got)
	}
}

func TestDedupeKeepsHeadersAndTracesWithTheirMessages(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	writeAll(t, w, t0)
	w.Offer(Publish{Bodies: bodies("dup", "new"), IDs: []string{"x", "y"}, Headers: bodies(`{"##msg_id":"x"}`, `{"##msg_id":"y"}`), Traces: []uint64{1, 2}, Token: "b", ReceivedAt: t0})
	_, writes := writeAll(t, w, t0)
	msgs := decodeAll(t, writes[0].Data)
	if len(msgs) != 1 || string(msgs[0].Body) != "new" || MsgIDOf(msgs[0].Header) != "y" || msgs[0].TraceID != 2 {
		t.Fatalf("wrote %+v", msgs)
	}
}

func TestDedupeOffWritesEveryPublish(t *testing.T) {
	w := NewWriter(WriterConfig{Partition: 1, Epoch: 1, Replicas: 1}, Position{})
	offerIDs(w, "a", t0, "x")
	offerIDs(w, "b", t0, "x")
	if _, writes := writeAll(t, w, t0); len(writes) != 1 || writes[0].Record.MsgNum != 2 {
		t.Fatal("without a window both publishes are not written")
	}
	if w.Dedupe() != nil {
		t.Fatal("a window without a setting")
	}
}

func TestDedupeForgetsCommitsThatDidNotReachTheDisk(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	writeAll(t, w, t0)
	offerIDs(w, "b", t0, "y")
	_, writes := writeAll(t, w, t0)
	// The shell failed to append b's commit record: the committed end is
	// still after a.
	w.Abandon(Position{NextID: uint64(writes[0].Record.LogID), End: writes[0].Record.MsgOffset, Count: 1}, ErrNotWritable)
	if r := offerIDs(w, "c", t0, "y"); r != nil {
		t.Fatalf("ID whose commit failed answered as written: %+v", r)
	}
	if r := offerIDs(w, "d", t0, "x"); r == nil {
		t.Fatal("ID committed before the failure forgotten")
	}
}

func TestDedupeRebuiltWindowAnswersRetries(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	w.Dedupe().Remember("old", 5, 0, 40, t0.Add(-2*time.Minute).UnixNano())
	w.Dedupe().Remember("x", 6, 40, 40, t0.Add(-time.Second).UnixNano())
	if r := offerIDs(w, "a", t0, "x"); r == nil || r.MsgID != 6 || r.Offset != 40 || r.Size != 40 || r.FirstID != 6 {
		t.Fatalf("retry of a message in the rebuilt window answered %+v", r)
	}
	if r := offerIDs(w, "b", t0, "old"); r != nil {
		t.Fatal("a message older than the window still answers")
	}
}

func TestMsgIDOfHeaders(t *testing.T) {
	for h, want := range map[string]string{
		``:                        "",
		`{"##trace_id":"1"}`:      "",
		`{"##msg_id":"order-17"}`: "order-17",
		`{"a":1,"##msg_id":"k"}`:  "k",
		`{"##msg_id":17}`:         "",
		`{"##msg_id":""}`:         "",
	} {
		if got := MsgIDOf([]byte(h)); got != want {
			t.Errorf("MsgIDOf(%s) = %q, want %q", h, got, want)
		}
	}
}

func decodeAll(t *testing.T, data []byte) []storage.Message {
	t.Helper()
	var out []storage.Message
	for len(data) > 0 {
		m, n, err := storage.DecodeMessage(data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		data = data[n:]
	}
	return out
}

// A publish parked on an ID of a write that commits is settled only once
// that commit is on disk: when appending the commit record fails (the
// shell's failCommit: the record's replies fail, Abandon at the committed
// end), neither a duplicate answered from it (c: x written before, y in
// the failed record) nor the rest of a batch written without it (d: y
// dropped as written, z new) is answered OK without y in the log.
func TestDedupeParkedPublishWaitsForTheCommitOnDisk(t *testing.T) {
	w := dedupeWriter(time.Minute, 0)
	offerIDs(w, "a", t0, "x")
	writeAll(t, w, t0)
	offerIDs(w, "b", t0, "y")
	wr := w.NextWrite(t0)
	offerIDs(w, "c", t0, "x", "y")
	offerIDs(w, "d", t0, "y", "z")
	r := w.LocalWritten(wr.Record.LogID, nil)
	if len(r.Commits) != 1 {
		t.Fatalf("commits %+v, want b's record", r.Commits)
	}
	// The commit record does not reach the disk.
	failed := r.Commits[0]
	for _, rep := range r.Replies {
		if rep.Err == nil && int64(rep.FirstID) < failed.LogID {
			t.Fatalf("%v answered OK from before the failed record: %+v", rep.Token, rep)
		}
	}
	ab := w.Abandon(Position{NextID: uint64(failed.LogID), End: failed.MsgOffset, Count: failed.MsgCnt - 1, Last: wr.Prev}, ErrNotWritable)
	for _, rep := range ab.Replies {
		if rep.Err == nil {
			t.Fatalf("%v answered OK after its ID's commit failed: %+v", rep.Token, rep)
		}
	}
	replies, writes := writeAll(t, w, t0)
	var logged []string
	for _, wr := range writes {
		for _, m := range decodeAll(t, wr.Data) {
			logged = append(logged, MsgIDOf(m.Header)+string(m.Body))
		}
	}
	for _, rep := range replies {
		if rep.Err != nil {
			t.Fatalf("%v refused: %+v", rep.Token, rep)
		}
	}
	equalTokens(t, replies, "c", "d")
	if len(logged) != 2 || logged[0] != "body-y" || logged[1] != "body-z" {
		t.Fatalf("written after the failure %q, want y and z once", logged)
	}
}

// The ID a rebuilt window remembers is the one the publish was checked
// under (protocol.CheckHeaderID: the key "##msg_id" exactly): a key that
// differs in case only names no ID, or a message written under "a" would
// be remembered by a new leader as "b", and a different message published
// as "b" answered as its duplicate and never written.
func TestMsgIDOfMatchesTheKeyExactly(t *testing.T) {
	for h, want := range map[string]string{
		`{"##msg_id":"a","##MSG_ID":"b"}`: "a",
		`{"##MSG_ID":"b","##msg_id":"a"}`: "a",
		`{"##Msg_Id":"b"}`:                "",
		`{"x":"##msg_id","##MSG_ID":"b"}`: "",
	} {
		if got := MsgIDOf([]byte(h)); got != want {
			t.Errorf("MsgIDOf(%s) = %q, want %q", h, got, want)
		}
	}
}

// The ID index finds every ring slot added under a hash and not removed,
// through long runs of colliding homes and removals from their middle.
func TestIDIndexFindsWhatWasAddedAndNotRemoved(t *testing.T) {
	const n = 64
	x := newIDIndex(n)
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[int]uint64{} // ring slot → hash
	for step := range 20000 {
		ring := rng.IntN(n)
		if h, ok := live[ring]; ok {
			x.remove(h, ring)
			delete(live, ring)
		} else {
			// Few distinct homes and tags: long runs, shared tags.
			h := uint64(rng.IntN(8))<<40 | uint64(rng.IntN(16))
			x.insert(h, ring)
			live[ring] = h
		}
		for r, h := range live {
			found := false
			x.each(h, func(got int) { found = found || got == r })
			if !found {
				t.Fatalf("step %d: ring slot %d under hash %x not found", step, r, h)
			}
		}
		used := 0
		for _, s := range x.slots {
			if s != 0 {
				used++
			}
		}
		if used != len(live) {
			t.Fatalf("step %d: %d slots used for %d entries", step, used, len(live))
		}
	}
}

// A publish refused for a full queue (ErrTooMuchWaiting) holds none of
// its IDs: its retry, once there is room, is written and answered, not
// parked for ever behind an ID no write will settle.
func TestDedupeRetryOfAPublishRefusedForAFullQueueIsWritten(t *testing.T) {
	w := NewWriter(WriterConfig{Partition: 1, Epoch: 1, Replicas: 1, MaxWaiting: 1}, Position{})
	w.SetDedupe(DedupeConfig{Window: time.Minute})
	offerIDs(w, "a", t0, "x")
	if r := offerIDs(w, "b", t0, "y"); r == nil || r.Err != ErrTooMuchWaiting {
		t.Fatalf("publish past MaxWaiting answered %+v, want ErrTooMuchWaiting", r)
	}
	writeAll(t, w, t0)
	if r := offerIDs(w, "c", t0, "y"); r != nil {
		t.Fatalf("retry answered at once: %+v", r)
	}
	replies, writes := writeAll(t, w, t0)
	equalTokens(t, replies, "c")
	if len(writes) != 1 || replies[0].Err != nil || !w.Idle() {
		t.Fatalf("retry not written: %d writes, %+v, idle %v", len(writes), replies, w.Idle())
	}
}
