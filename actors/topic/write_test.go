package topic

import (
	"errors"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

var t0 = time.Unix(1_700_000_000, 0)

func bodies(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func offer(t *testing.T, w *Writer, token string, msgs ...string) {
	t.Helper()
	if r := w.Offer(Publish{Bodies: bodies(msgs...), Token: token}); r != nil {
		t.Fatalf("offer %s refused: %v", token, r.Err)
	}
}

// writtenHere offers a publish, takes it as the next write and reports it
// written to the local log, the step before the followers' acks.
func writtenHere(t *testing.T, w *Writer, token string, msgs ...string) *Write {
	t.Helper()
	offer(t, w, token, msgs...)
	wr := w.NextWrite(t0)
	w.LocalWritten(wr.Record.LogID, nil)
	return wr
}

func tokens(rs []Reply) []any {
	out := make([]any, len(rs))
	for i, r := range rs {
		out[i] = r.Token
	}
	return out
}

func equalTokens(t *testing.T, got []Reply, want ...any) {
	t.Helper()
	g := tokens(got)
	if len(g) != len(want) {
		t.Fatalf("replies %v, want %v", g, want)
	}
	for i := range want {
		if g[i] != want[i] {
			t.Fatalf("replies %v, want %v", g, want)
		}
	}
}

func TestGroupCommitMakesOneRecord(t *testing.T) {
	w := NewWriter(WriterConfig{Partition: 3, Epoch: 7, Replicas: 1}, Position{})
	offer(t, w, "a", "1")
	offer(t, w, "b", "2", "3")
	offer(t, w, "c", "4")
	wr := w.NextWrite(t0)
	if wr == nil {
		t.Fatal("no write")
	}
	rec := wr.Record
	first := FirstID(3)
	want := storage.CommitRecord{LogID: int64(first), Epoch: 7, LastMsgLogID: int64(first + 3), MsgOffset: 0, MsgSize: int32(len(wr.Data)), MsgCnt: 1, MsgNum: 4}
	if rec != want {
		t.Fatalf("record %+v, want %+v", rec, want)
	}
	if w.NextWrite(t0) != nil {
		t.Fatal("second write with nothing waiting")
	}
	r := w.LocalWritten(rec.LogID, nil)
	if len(r.Commits) != 1 || r.Commits[0] != rec {
		t.Fatalf("commits %+v", r.Commits)
	}
	equalTokens(t, r.Replies, "a", "b", "c")
	for _, rep := range r.Replies {
		if rep.Err != nil || rep.FirstID != first {
			t.Fatalf("reply %+v", rep)
		}
	}
	// The data decodes to the four messages with consecutive IDs.
	for i := 0; i < 4; i++ {
		m, n, err := storage.DecodeMessage(wr.Data)
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != first+uint64(i) || PartitionOf(m.ID) != 3 || m.Timestamp != t0.UnixNano() {
			t.Fatalf("message %d: %+v", i, m)
		}
		wr.Data = wr.Data[n:]
	}
}

func TestBatchLimitsSplitRecords(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 1, MaxBatchMessages: 2, Window: 4}, Position{})
	offer(t, w, "a", "1")
	offer(t, w, "b", "2")
	offer(t, w, "c", "3")
	w1, w2 := w.NextWrite(t0), w.NextWrite(t0)
	if w1 == nil || w2 == nil || w.NextWrite(t0) != nil {
		t.Fatal("want exactly two writes")
	}
	if w1.Record.MsgNum != 2 || w2.Record.MsgNum != 1 {
		t.Fatalf("MsgNum %d, %d", w1.Record.MsgNum, w2.Record.MsgNum)
	}
	if w2.Record.MsgOffset != w1.Record.End() || w2.Record.MsgCnt != 3 || w2.Record.LogID != w1.Record.LastMsgLogID+1 {
		t.Fatalf("second record does not follow the first: %+v after %+v", w2.Record, w1.Record)
	}
}

// A publish larger than the batch cap is still written whole.
func TestOversizedPublishIsNotSplit(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 1, MaxBatchMessages: 2}, Position{})
	offer(t, w, "big", "1", "2", "3")
	if wr := w.NextWrite(t0); wr == nil || wr.Record.MsgNum != 3 {
		t.Fatalf("write %+v", wr)
	}
}

// Writes commit in LogID order once every follower has them, and a
// follower's ack of a write covers the writes before it: it appends a
// write only after the record it follows.
func TestCommitWaitsForEveryFollowerInLogIDOrder(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4}, Position{})
	offer(t, w, "a", "1")
	w1 := w.NextWrite(t0)
	r := w.LocalWritten(w1.Record.LogID, nil)
	if len(r.Sends) != 2 || len(r.Commits) != 0 {
		t.Fatalf("after local write: %+v", r)
	}
	writtenHere(t, w, "b", "2")
	w3 := writtenHere(t, w, "c", "3")

	steps := []struct {
		node    string
		logID   int64
		commits int
		replies []any
	}{
		{"n2", w3.Record.LogID, 0, nil}, // n2 has all three; n3 none
		{"n3", w1.Record.LogID, 1, []any{"a"}},
		{"n3", w3.Record.LogID, 2, []any{"b", "c"}}, // covers w2 too
	}
	for i, s := range steps {
		r := w.Acked(s.node, s.logID, nil)
		if len(r.Commits) != s.commits {
			t.Fatalf("step %d: %d commits, want %d", i, len(r.Commits), s.commits)
		}
		equalTokens(t, r.Replies, s.replies...)
	}
	if w.InFlight() != 0 {
		t.Fatalf("%d still in flight", w.InFlight())
	}
}

// A write a follower refused is not covered by its ack of a later write:
// it waits for the follower to leave the ISR.
func TestAckDoesNotCoverARefusedWrite(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4}, Position{})
	var ws []*Write
	for _, tok := range []string{"a", "b"} {
		offer(t, w, tok, tok)
		wr := w.NextWrite(t0)
		w.LocalWritten(wr.Record.LogID, nil)
		ws = append(ws, wr)
	}
	w.Acked("n3", ws[1].Record.LogID, nil)
	r := w.Acked("n2", ws[0].Record.LogID, &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "disk"})
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n2" {
		t.Fatalf("shrink %v, want n2 out of the ISR", r.ShrinkISR)
	}
	if r := w.Acked("n2", ws[1].Record.LogID, nil); len(r.Commits) != 0 {
		t.Fatalf("%d commits while n2 refused the first write, want none", len(r.Commits))
	}
	r = w.ISRShrunk(nil)
	if len(r.Commits) != 2 {
		t.Fatalf("%d commits once n2 left the ISR, want 2", len(r.Commits))
	}
}

func TestWindowBoundsWritesInFlight(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 2, MaxBatchMessages: 1}, Position{})
	for _, tok := range []string{"a", "b", "c"} {
		offer(t, w, tok, tok)
	}
	if w.NextWrite(t0) == nil || w.NextWrite(t0) == nil {
		t.Fatal("window of two should allow two writes")
	}
	if w.NextWrite(t0) != nil {
		t.Fatal("third write beyond the window")
	}
}

func TestWriteTimeoutRollsBackItAndLaterWrites(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 4, MaxBatchMessages: 1, WriteTimeout: 5 * time.Second}, Position{End: 100, Count: 2, NextID: FirstID(0) + 2})
	offer(t, w, "a", "1")
	w1 := w.NextWrite(t0)
	w.LocalWritten(w1.Record.LogID, nil)
	offer(t, w, "b", "2")
	w2 := w.NextWrite(t0.Add(time.Second))
	w.LocalWritten(w2.Record.LogID, nil)
	offer(t, w, "waiting", "3")

	if r := w.Tick(t0.Add(4 * time.Second)); len(r.Replies) != 0 {
		t.Fatalf("failed before the timeout: %+v", r)
	}
	r := w.Tick(t0.Add(5 * time.Second))
	if r.Truncate == nil || *r.Truncate != 100 {
		t.Fatalf("truncate %v, want 100", r.Truncate)
	}
	equalTokens(t, r.Replies, "a", "b", "waiting")
	for _, rep := range r.Replies {
		if rep.Err == nil {
			t.Fatalf("reply %v succeeded", rep.Token)
		}
	}
	if w.Writable() {
		t.Fatal("still writable after a failed write")
	}
	if p := w.Position(); p.End != 100 || p.Count != 2 || p.NextID != uint64(w2.Record.LastMsgLogID)+1 {
		t.Fatalf("position %+v: end and count roll back, IDs never", p)
	}
	if rep := w.Offer(Publish{Bodies: bodies("x"), Token: "x"}); rep == nil || rep.Err != ErrNotWritable {
		t.Fatalf("offer after disable: %+v", rep)
	}
}

func TestLocalWriteFailureAnswersAndKeepsIDsConsumed(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 1}, Position{})
	offer(t, w, "a", "1", "2")
	wr := w.NextWrite(t0)
	r := w.LocalWritten(wr.Record.LogID, errors.New("disk full"))
	if r.Truncate == nil || *r.Truncate != 0 || len(r.Commits) != 0 {
		t.Fatalf("ready %+v", r)
	}
	if len(r.Replies) != 1 || r.Replies[0].Err == nil || !r.Replies[0].Err.Local {
		t.Fatalf("replies %+v", r.Replies)
	}
	offer(t, w, "b", "3")
	next := w.NextWrite(t0)
	if next.Record.LogID <= wr.Record.LastMsgLogID || next.Record.MsgOffset != 0 || next.Record.MsgCnt != 1 {
		t.Fatalf("after failure: %+v (failed %+v)", next.Record, wr.Record)
	}
}

func TestGates(t *testing.T) {
	cases := []struct {
		name string
		cfg  WriterConfig
		pre  func(*Writer)
		want *Error
	}{
		{"quorum of one", WriterConfig{Replicas: 1}, nil, nil},
		{"ISR of one out of three", WriterConfig{Replicas: 3}, nil, ErrWriteQuorum},
		{"ISR of two out of three", WriterConfig{Replicas: 3, Followers: []string{"n2"}}, nil, nil},
		{"disabled", WriterConfig{Replicas: 1}, func(w *Writer) { w.Disable() }, ErrNotWritable},
		{"waiting queue full", WriterConfig{Replicas: 1, MaxWaiting: 2}, func(w *Writer) {
			w.Offer(Publish{Bodies: bodies("1", "2")})
		}, ErrTooMuchWaiting},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := NewWriter(c.cfg, Position{})
			if c.pre != nil {
				c.pre(w)
			}
			r := w.Offer(Publish{Bodies: bodies("x")})
			switch {
			case c.want == nil && r != nil:
				t.Fatalf("refused: %v", r.Err)
			case c.want != nil && (r == nil || r.Err != c.want):
				t.Fatalf("got %+v, want %v", r, c.want)
			}
		})
	}
}

func TestIDsCarryThePartition(t *testing.T) {
	for _, p := range []int32{0, 1, 7, 1023} {
		id := FirstID(p)
		if PartitionOf(id) != p || PartitionOf(id+12345) != p {
			t.Errorf("partition %d: got %d", p, PartitionOf(id))
		}
	}
}

// A failed commit on this node's disk fails every write in flight, restarts
// the log at the committed end and keeps IDs and followers.
func TestAbandonFailsInFlightAndKeepsRole(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4, MaxBatchMessages: 1}, Position{})
	offer(t, w, "a", "1")
	w1 := w.NextWrite(t0)
	w.LocalWritten(w1.Record.LogID, nil)
	offer(t, w, "b", "2")
	w2 := w.NextWrite(t0)
	w.LocalWritten(w2.Record.LogID, nil)
	r := w.Abandon(Position{NextID: FirstID(0), End: 0, Count: 0}, localError(errors.New("disk")))
	equalTokens(t, r.Replies, "a", "b")
	if w.InFlight() != 0 || len(w.Followers()) != 2 {
		t.Fatalf("in flight %d, followers %v", w.InFlight(), w.Followers())
	}
	offer(t, w, "c", "3")
	next := w.NextWrite(t0)
	if next.Record.MsgOffset != 0 || next.Record.LogID <= w2.Record.LastMsgLogID {
		t.Fatalf("after abandon: %+v", next.Record)
	}
}

// A publish arriving at or after its deadline is refused at once and
// never queued; one arriving before it is queued as any other.
func TestPublishArrivingPastItsDeadlineIsRefused(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 1}, Position{})
	deadline := t0.Add(time.Second)
	if r := w.Offer(Publish{Bodies: bodies("late"), Token: "late", ReceivedAt: deadline, Deadline: deadline}); r == nil || r.Err != ErrDeadlinePassed {
		t.Fatalf("publish arriving at its deadline: %+v, want ErrDeadlinePassed", r)
	}
	if w.Waiting() != 0 {
		t.Fatalf("%d messages queued after the refusal", w.Waiting())
	}
	if r := w.Offer(Publish{Bodies: bodies("in time"), Token: "in time", ReceivedAt: deadline.Add(-time.Nanosecond), Deadline: deadline}); r != nil {
		t.Fatalf("publish arriving before its deadline refused: %v", r.Err)
	}
	wr := w.NextWrite(deadline.Add(-time.Nanosecond))
	if wr == nil || wr.Record.MsgNum != 1 {
		t.Fatalf("write %+v, want the publish that came in time", wr)
	}
}

// A publish queued behind a full window whose deadline passes before a
// write can take it is refused when the window frees, and the record
// written then holds only the publishes still within theirs: a refused
// publish takes no ID and no byte of the log.
func TestQueuedPublishPastItsDeadlineIsNotWritten(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 1}, Position{})
	offer(t, w, "first", "1")
	first := w.NextWrite(t0)
	w.LocalWritten(first.Record.LogID, nil)
	deadline := t0.Add(time.Second)
	for _, p := range []Publish{
		{Bodies: bodies("2"), Token: "expires", ReceivedAt: t0, Deadline: deadline},
		{Bodies: bodies("3"), Token: "no deadline", ReceivedAt: t0},
		{Bodies: bodies("4"), Token: "later deadline", ReceivedAt: t0, Deadline: deadline.Add(time.Second)},
	} {
		if r := w.Offer(p); r != nil {
			t.Fatalf("offer %v refused: %v", p.Token, r.Err)
		}
	}
	if refused := w.Expire(deadline); len(refused) != 0 {
		t.Fatalf("refused %v while no write could start: they wait with the rest", tokens(refused))
	}
	equalTokens(t, w.Acked("n2", first.Record.LogID, nil).Replies, "first")

	refused := w.Expire(deadline)
	equalTokens(t, refused, "expires")
	if refused[0].Err != ErrDeadlinePassed {
		t.Fatalf("refusal %v, want ErrDeadlinePassed", refused[0].Err)
	}
	if w.Waiting() != 2 {
		t.Fatalf("%d messages waiting, want the 2 still within their deadline", w.Waiting())
	}
	wr := w.NextWrite(deadline)
	if wr == nil || wr.Record.MsgNum != 2 || wr.Record.LogID != first.Record.LastMsgLogID+1 {
		t.Fatalf("write %+v after %+v: want the 2 publishes left, next to the first", wr, first.Record)
	}
	if got := wr.Record.MsgOffset + int64(wr.Record.MsgSize); got != w.Position().End {
		t.Fatalf("log end %d, want %d", w.Position().End, got)
	}
	equalTokens(t, w.Acked("n2", wr.Record.LogID, nil).Replies, "no deadline", "later deadline")
}

// Expire looks only as far as the next record could reach: past the
// publishes a write can take, a publish whose deadline passed waits
// until it comes near the front, and is refused then.
func TestExpireLooksOnlyAsFarAsTheNextRecord(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 1, MaxBatchMessages: 2}, Position{})
	deadline := t0.Add(time.Second)
	for _, p := range []Publish{
		{Bodies: bodies("a"), Token: "expired", ReceivedAt: t0, Deadline: deadline},
		{Bodies: bodies("b"), Token: "b", ReceivedAt: t0},
		{Bodies: bodies("c"), Token: "c", ReceivedAt: t0},
		{Bodies: bodies("d"), Token: "expired behind", ReceivedAt: t0, Deadline: deadline},
	} {
		if r := w.Offer(p); r != nil {
			t.Fatalf("offer %v refused: %v", p.Token, r.Err)
		}
	}
	equalTokens(t, w.Expire(deadline), "expired")
	wr := w.NextWrite(deadline)
	if wr == nil || wr.Record.MsgNum != 2 {
		t.Fatalf("write %+v, want b and c", wr)
	}
	equalTokens(t, w.LocalWritten(wr.Record.LogID, nil).Replies, "b", "c")
	equalTokens(t, w.Expire(deadline), "expired behind")
	if w.Waiting() != 0 || w.NextWrite(deadline) != nil {
		t.Fatalf("%d messages still waiting", w.Waiting())
	}
}

// A forwarded publish names the epoch of the state its forwarder chose
// this leader from. One chosen before this leadership began is refused,
// writing nothing: another node may have led in between. One chosen
// during it is taken, after a follower joined the ISR (a new epoch, the
// same leadership) too, and so is a client's, which names none.
func TestForwardToAnEarlierLeadershipIsRefused(t *testing.T) {
	w := threeReplicaWriter() // leads from epoch 4
	if r := w.Offer(Publish{Bodies: bodies("stale"), Token: "stale", SeenEpoch: 3}); r == nil || r.Err != ErrEarlierLeadership {
		t.Fatalf("publish forwarded in epoch 3 to a leadership of epoch 4: %+v, want ErrEarlierLeadership", r)
	}
	if w.Waiting() != 0 {
		t.Fatalf("%d messages waiting after the refusal", w.Waiting())
	}
	w.SetFollowers([]string{"n2", "n3"}, 6) // a follower rejoined: epoch 6, still this leadership
	for _, p := range []Publish{
		{Bodies: bodies("a"), Token: "chosen at its start", SeenEpoch: 4},
		{Bodies: bodies("b"), Token: "chosen after the join", SeenEpoch: 6},
		{Bodies: bodies("c"), Token: "a view ahead of this node", SeenEpoch: 7},
		{Bodies: bodies("d"), Token: "a client's"},
	} {
		if r := w.Offer(p); r != nil {
			t.Fatalf("offer %v refused: %v", p.Token, r.Err)
		}
	}
	if wr := w.NextWrite(t0); wr == nil || wr.Record.MsgNum != 4 || wr.Record.Epoch != 6 {
		t.Fatalf("write %+v: want the 4 taken publishes in epoch 6", wr)
	}
}

// A follower whose stream broke counted as failed for the writes in flight;
// once it is back they wait for its ack again and commit on it, where with
// one follower in sync nothing else would end them before WriteTimeout.
func TestFollowerBackIsWaitedForAgain(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2"}, Window: 4}, Position{})
	offer(t, w, "a", "a")
	wr := w.NextWrite(t0)
	w.LocalWritten(wr.Record.LogID, nil)
	if r := w.FollowerDown("n2"); r.LeaveISR || len(r.ShrinkISR) > 0 || len(r.Commits) > 0 {
		t.Fatalf("follower down with no majority left: %+v, want the write to wait", r)
	}
	if r := w.Acked("n2", wr.Record.LogID, nil); len(r.Commits) != 0 {
		t.Fatal("an ack from a follower counted failed committed the write")
	}
	if w.FollowerBack("n3") {
		t.Fatal("n3, which no write counted failed, reported back")
	}
	if !w.FollowerBack("n2") {
		t.Fatal("the write that counted n2 failed was not reported")
	}
	r := w.Acked("n2", wr.Record.LogID, nil)
	if len(r.Commits) != 1 || len(r.Replies) != 1 || r.Replies[0].Err != nil {
		t.Fatalf("ack after the stream came back: %+v, want the write committed and answered", r)
	}
	if w.FollowerBack("n2") {
		t.Fatal("nothing is in flight, yet a write was reported")
	}
}

// With writes disabled, followers down leave the ISR only when the leader
// and the rest are a majority of the replicas, and only once.
func TestShrinkDownNeedsAMajorityWithoutThem(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 4}, Position{})
	if r := w.ShrinkDown([]string{"n3"}); len(r.ShrinkISR) != 0 {
		t.Fatalf("shrink %v while writable, want none: the next write decides", r.ShrinkISR)
	}
	w.Disable()
	if r := w.ShrinkDown([]string{"n2", "n3"}); len(r.ShrinkISR) != 0 {
		t.Fatalf("shrink %v with every follower down, want none: the leader alone is no majority", r.ShrinkISR)
	}
	if r := w.ShrinkDown([]string{"n4"}); len(r.ShrinkISR) != 0 {
		t.Fatalf("shrink %v of a node not in the ISR", r.ShrinkISR)
	}
	r := w.ShrinkDown([]string{"n4", "n3"})
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
		t.Fatalf("shrink %v, want n3 out", r.ShrinkISR)
	}
	if r := w.ShrinkDown([]string{"n3"}); len(r.ShrinkISR) != 0 {
		t.Fatalf("shrink %v asked again while the first is under way", r.ShrinkISR)
	}
	w.ISRShrunk(nil)
	if f := w.Followers(); len(f) != 1 || f[0] != "n2" {
		t.Fatalf("followers %v after the shrink, want [n2]", f)
	}
	two := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 4}, Position{})
	two.Disable()
	if r := two.ShrinkDown([]string{"n2"}); len(r.ShrinkISR) != 0 {
		t.Fatalf("shrink %v of the only follower of two replicas, want none", r.ShrinkISR)
	}
}

// The writes a leadership begins before its first commit wait for its
// followers to turn to it: their replies are settling, which admission
// does not read as load. Writes begun after the first commit are not.
// A write in flight or a publish waiting while a follower is shrunk out
// of the ISR, or while a join holds the writes, waited for the ISR to
// change, not in a queue: its answer is settling. What begins after the
// change is not.
func TestWritesQueuedBehindAnISRChangeAreSettling(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 3, Followers: []string{"n2", "n3"}, Window: 1, MaxBatchMessages: 1}, Position{})
	ackAll := func(wr *Write, from ...string) Ready {
		var r Ready
		for _, n := range from {
			r = w.Acked(n, wr.Record.LogID, nil)
		}
		return r
	}
	settling := func(r Ready, token string, want bool) {
		t.Helper()
		equalTokens(t, r.Replies, token)
		if r.Replies[0].Settling != want {
			t.Fatalf("reply %s settling %v, want %v", token, r.Replies[0].Settling, want)
		}
	}
	settling(ackAll(writtenHere(t, w, "x", "0"), "n2", "n3"), "x", true) // the leadership's first
	settling(ackAll(writtenHere(t, w, "y", "1"), "n2", "n3"), "y", false)

	a := writtenHere(t, w, "a", "2")
	w.Acked("n2", a.Record.LogID, nil)
	if r := w.FollowerDown("n3"); len(r.ShrinkISR) != 1 {
		t.Fatalf("shrink %v, want n3 out", r.ShrinkISR)
	}
	offer(t, w, "b", "3") // waits: the window is full
	settling(w.ISRShrunk(nil), "a", true)
	b := w.NextWrite(t0)
	w.LocalWritten(b.Record.LogID, nil)
	settling(w.Acked("n2", b.Record.LogID, nil), "b", true)
	settling(ackAll(writtenHere(t, w, "c", "4"), "n2"), "c", false)

	w.Hold()
	offer(t, w, "d", "5")
	if w.NextWrite(t0) != nil {
		t.Fatal("a write started while held")
	}
	w.Release()
	d := w.NextWrite(t0)
	w.LocalWritten(d.Record.LogID, nil)
	settling(w.Acked("n2", d.Record.LogID, nil), "d", true)
	settling(ackAll(writtenHere(t, w, "e", "6"), "n2"), "e", false)
}

func TestWritesBeforeALeadershipsFirstCommitAreSettling(t *testing.T) {
	w := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 4, MaxBatchMessages: 1}, Position{})
	writtenHere(t, w, "a", "1")
	w2 := writtenHere(t, w, "b", "2")
	r := w.Acked("n2", w2.Record.LogID, nil)
	equalTokens(t, r.Replies, "a", "b")
	for _, rep := range r.Replies {
		if !rep.Settling {
			t.Fatalf("reply %v of a write begun before the first commit is not settling", rep.Token)
		}
	}
	offer(t, w, "c", "3")
	w3 := w.NextWrite(t0)
	w.LocalWritten(w3.Record.LogID, nil)
	r = w.Acked("n2", w3.Record.LogID, nil)
	equalTokens(t, r.Replies, "c")
	if r.Replies[0].Settling {
		t.Fatal("a write begun after the leadership's first commit is settling")
	}
}

// A hand-over holds writes: publishes queue and no record starts, the
// writes in flight commit, and the writer is drained once none is in
// flight. Deposed then refuses the queued publishes as never written;
// a hand-over that ends without the move writes them in one record.
func TestHandOverDrainsTheWritesInFlight(t *testing.T) {
	for _, moved := range []bool{true, false} {
		w := NewWriter(WriterConfig{Replicas: 2, Followers: []string{"n2"}, Window: 4}, Position{})
		w.Enable()
		first := writtenHere(t, w, "in flight", "1")
		w.HandOver()
		if w.Drained() {
			t.Fatal("drained with a write in flight")
		}
		offer(t, w, "queued", "2")
		offer(t, w, "queued too", "3")
		if wr := w.NextWrite(t0); wr != nil {
			t.Fatalf("a write started during the hand-over: %+v", wr.Record)
		}
		r := w.Acked("n2", first.Record.LogID, nil)
		equalTokens(t, r.Replies, "in flight")
		if r.Replies[0].Err != nil || !w.Drained() {
			t.Fatalf("the write in flight answered %v, drained %v; want committed and drained", r.Replies[0].Err, w.Drained())
		}
		if moved {
			r := w.Deposed()
			equalTokens(t, r.Replies, "queued", "queued too")
			for _, rep := range r.Replies {
				if rep.Err != ErrDeposed {
					t.Fatalf("a queued publish answered %v at the move, want %v", rep.Err, ErrDeposed)
				}
			}
			continue
		}
		w.EndHandOver()
		wr := w.NextWrite(t0)
		if w.Drained() || wr == nil || wr.Record.MsgNum != 2 {
			t.Fatalf("after the hand-over ended: drained %v, next write %+v; want both queued publishes in one record", w.Drained(), wr)
		}
	}
}
