package topic

import (
	"errors"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

// Tests named after the numbered behaviours of
// docs/replication.md#numbered-behaviours that the pure write and apply
// cores decide. Time rules are the durations --isr-shrink-after and
// --write-timeout.

func threeReplicaWriter() *Writer {
	return NewWriter(WriterConfig{
		Partition: 1, Epoch: 4, Replicas: 3, Followers: []string{"n2", "n3"},
		Window: 8, ShrinkAfter: time.Second, WriteTimeout: 5 * time.Second,
	}, Position{})
}

func writeOne(t *testing.T, w *Writer, token string, now time.Time) *Write {
	t.Helper()
	offer(t, w, token, token)
	wr := w.NextWrite(now)
	if wr == nil {
		t.Fatal("no write")
	}
	w.LocalWritten(wr.Record.LogID, nil)
	return wr
}

// 1. A write is acknowledged only once every ISR member has it and the ISR
// is a majority of the configured replicas.
func TestBehaviour01AckOnlyWhenEveryISRMemberHasIt(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	if r := w.Acked("n2", wr.Record.LogID, nil); len(r.Replies)+len(r.Commits) != 0 {
		t.Fatalf("acknowledged with n3 missing: %+v", r)
	}
	r := w.Acked("n3", wr.Record.LogID, nil)
	if len(r.Commits) != 1 || len(r.Replies) != 1 || r.Replies[0].Err != nil {
		t.Fatalf("not acknowledged with every ISR member: %+v", r)
	}
	if rep := NewWriter(WriterConfig{Replicas: 3}, Position{}).Offer(Publish{Bodies: bodies("x")}); rep == nil || rep.Err != ErrWriteQuorum {
		t.Fatalf("ISR of 1 out of 3 accepted a write: %+v", rep)
	}
}

// 2. Consumers never see beyond the committed offset: the core announces
// nothing (no Commits) until the write is acknowledged everywhere.
func TestBehaviour02NothingVisibleBeforeCommit(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	r := w.Acked("n2", wr.Record.LogID, nil)
	if len(r.Commits) != 0 {
		t.Fatal("committed before every ack")
	}
	r = w.FollowerDown("n3")
	if len(r.Commits) != 0 {
		t.Fatal("committed after a follower went down, before the ISR shrank")
	}
}

// 3. A non-leader writes nothing: the shell never feeds a Writer on a
// follower; the follower core refuses writes outside its epoch.
func TestBehaviour03NonLeaderRejectsWrites(t *testing.T) {
	w := threeReplicaWriter()
	w.Disable()
	if rep := w.Offer(Publish{Bodies: bodies("x")}); rep == nil || rep.Err == nil {
		t.Fatal("disabled leader took a write")
	}
	if w.NextWrite(t0) != nil {
		t.Fatal("disabled leader produced a write")
	}
}

// 4. A write-disabled partition refuses writes and follower applies.
func TestBehaviour04WriteDisabledRefusesWritesAndApplies(t *testing.T) {
	w := threeReplicaWriter()
	r := w.Disable()
	if w.Writable() || len(r.Replies) != 0 {
		t.Fatalf("disable: %+v", r)
	}
	f := newFollower(4)
	f.SetWritable(false)
	d := f.Check(leaderWrite(t, 4, 1, Position{NextID: FirstID(1)}, "x"))
	if d.Append || d.Err == nil || !d.LeaveISR {
		t.Fatalf("disabled follower: %+v", d)
	}
}

// 5. Records carry EpochForWrite; a follower refuses another epoch.
func TestBehaviour05EpochStampedAndChecked(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	if wr.Record.Epoch != 4 {
		t.Fatalf("record epoch %d, want 4", wr.Record.Epoch)
	}
	f := newFollower(5)
	d := f.Check(ReplicaWriteIn{EpochForWrite: 4, Record: wr.Record, Data: wr.Data})
	if d.Append || d.Err != ErrEpochMismatch || d.Kind != KindTemporary {
		t.Fatalf("wrong epoch: %+v", d)
	}
}

// A follower takes channel positions from the leadership it knows, in any
// epoch since that leadership began: a join or a re-enable raises the
// epoch here before the leader may have heard of it, and refusing the
// leader's positions meanwhile would fail its ordered FINs. A position of
// an epoch before the leadership began is a deposed leader's, refused.
// Without the leadership's start the follower's own epoch is the bound.
func TestFollowerTakesPositionsOfItsLeadershipAcrossEpochBumps(t *testing.T) {
	f := newFollower(7)
	if f.OffsetFrom(6) || !f.OffsetFrom(7) || !f.OffsetFrom(8) || !f.OffsetFrom(0) {
		t.Fatal("with no leadership start the bound is the follower's epoch 7, and 0 (unstamped) passes")
	}
	f.SetLeaderSince(5)
	for epoch, want := range map[int64]bool{4: false, 5: true, 6: true, 7: true, 8: true} {
		if got := f.OffsetFrom(epoch); got != want {
			t.Errorf("leadership since 5, epoch 7: position of epoch %d taken %v, want %v", epoch, got, want)
		}
	}
	f.SetLeaderSince(9) // a start after the epoch this replica knows reads as unknown
	if f.OffsetFrom(6) || !f.OffsetFrom(7) {
		t.Fatal("a leadership start later than the follower's epoch must not lower or raise its bound")
	}
}

// A write of a later epoch than the follower's is a leader elected since,
// arriving before the metadata: the follower takes its epoch and applies
// it, and refuses the earlier epoch's writes from then on, as it would
// once the metadata came.
func TestFollowerTakesTheEpochOfALaterLeader(t *testing.T) {
	f := newFollower(4)
	in := leaderWrite(t, 5, 1, Position{NextID: FirstID(1)}, "a")
	apply(t, f, in)
	if f.Epoch() != 5 {
		t.Fatalf("epoch %d after a write of epoch 5, want 5", f.Epoch())
	}
	old := leaderWrite(t, 4, 1, f.Position(), "b")
	if d := f.Check(old); d.Append || d.Err != ErrEpochMismatch || d.Kind != KindTemporary || d.LeaveISR {
		t.Fatalf("write of the earlier epoch 4: %+v, want a temporary epoch refusal", d)
	}
	if d := f.CheckEmpty(4); d.Err != ErrEpochMismatch {
		t.Fatalf("probe of the earlier epoch 4: %+v, want an epoch refusal", d)
	}
	if d := f.CheckEmpty(6); d.Err != nil || f.Epoch() != 6 {
		t.Fatalf("probe of a later epoch 6: %+v, epoch %d; want it taken", d, f.Epoch())
	}
}

// A follower that takes a later epoch from a write cannot tell a new
// leadership from a join under the present one, so the leadership's first
// epoch it knew no longer bounds the positions it takes: a deposed
// leader's, of the epochs between, would pass.
func TestFollowerTakingALaterEpochFencesPositionsAtIt(t *testing.T) {
	f := newFollower(7)
	f.SetLeaderSince(5)
	if !f.OffsetFrom(6) {
		t.Fatal("leadership since 5: a position of epoch 6 must be taken")
	}
	apply(t, f, leaderWrite(t, 9, 1, Position{NextID: FirstID(1)}, "a"))
	for epoch, want := range map[int64]bool{5: false, 6: false, 8: false, 9: true, 10: true, 0: true} {
		if got := f.OffsetFrom(epoch); got != want {
			t.Errorf("epoch 9 taken from a write: position of epoch %d taken %v, want %v", epoch, got, want)
		}
	}
}

// The metadata a follower hears of after it took a later epoch from a
// write may be older: the epoch stays, with the flags of a replica written
// to, and the epoch-4 leader it deposed is refused. Metadata of that epoch
// or a later one makes a core as the metadata says.
func TestFollowerOfOlderMetadataKeepsTheEpochTaken(t *testing.T) {
	f := newFollower(3)
	apply(t, f, leaderWrite(t, 5, 1, Position{NextID: FirstID(1)}, "a"))
	next := FollowRole(f.Follower, 4, false, 4, f.Position(), nil)
	if next.Epoch() != 5 || !next.inISR || !next.writable {
		t.Fatalf("after metadata of epoch 4: epoch %d, in ISR %v, writable %v; want 5, true, true", next.Epoch(), next.inISR, next.writable)
	}
	if d := next.CheckEmpty(4); d.Err != ErrEpochMismatch {
		t.Fatalf("probe of the deposed epoch 4: %+v, want an epoch refusal", d)
	}
	if next.OffsetFrom(4) {
		t.Fatal("a position of the deposed epoch 4 was taken")
	}
	for _, epoch := range []int64{5, 6} {
		now := FollowRole(next, epoch, false, 2, f.Position(), nil)
		if now.Epoch() != epoch || now.inISR || !now.OffsetFrom(2) {
			t.Fatalf("metadata of epoch %d: epoch %d, in ISR %v, positions of its leadership's epoch 2 taken %v", epoch, now.Epoch(), now.inISR, now.OffsetFrom(2))
		}
	}
}

// The metadata a follower knows when a later leader's write arrives is
// older than the leader's: a partition it knows as not writable, or
// itself as outside the ISR, may since have been re-enabled or joined, both
// with a new epoch. A write of that epoch is applied, not refused as by a
// replica leaving the ISR; in its own epoch the old flags still hold.
func TestFollowerOfALaterEpochForgetsTheEarlierFlags(t *testing.T) {
	for name, set := range map[string]func(*testFollower){
		"not writable": func(f *testFollower) { f.SetWritable(false) },
		"not in ISR":   func(f *testFollower) { f.SetISR(false) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFollower(4)
			set(f)
			if d := f.Check(leaderWrite(t, 4, 1, Position{NextID: FirstID(1)}, "a")); d.Append || !d.LeaveISR {
				t.Fatalf("write of its own epoch: %+v, want refused", d)
			}
			apply(t, f, leaderWrite(t, 5, 1, Position{NextID: FirstID(1)}, "a"))
		})
	}
}

// 6. Resending the last record (or any committed one, with a pipeline)
// is acknowledged without writing.
func TestBehaviour06ResentRecordAcknowledgedWithoutWrite(t *testing.T) {
	f := newFollower(4)
	in := leaderWrite(t, 4, 1, Position{NextID: FirstID(1)}, "a", "b")
	apply(t, f, in)
	in2 := leaderWrite(t, 4, 1, f.Position(), "c")
	apply(t, f, in2)
	for _, again := range []ReplicaWriteIn{in2, in} {
		if d := f.Check(again); !d.Duplicate || d.Append || d.Err != nil {
			t.Fatalf("resend of %d: %+v", again.Record.LogID, d)
		}
	}
	bad := in
	bad.Record.MsgSize++
	if d := f.Check(bad); d.Duplicate || d.Err != ErrDuplicateDiffer {
		t.Fatalf("differing resend: %+v", d)
	}
}

// 7. A follower refuses a record at the wrong offset or of the wrong size
// and asks to leave the ISR.
func TestBehaviour07OffsetAndSizeChecked(t *testing.T) {
	f := newFollower(4)
	in := leaderWrite(t, 4, 1, Position{NextID: FirstID(1), End: 40}, "a")
	if d := f.Check(in); d.Err != ErrOffsetMismatch || !d.LeaveISR {
		t.Fatalf("offset: %+v", d)
	}
	in = leaderWrite(t, 4, 1, Position{NextID: FirstID(1)}, "a")
	in.Record.MsgSize += 4
	in.Data = append(in.Data, 0, 0, 0, 0)
	if d := f.Check(in); d.Err == nil || !d.LeaveISR {
		t.Fatalf("size: %+v", d)
	}
}

// 8. The first and last IDs must match the record; after a batch the
// follower's next ID is past LastMsgLogID.
func TestBehaviour08BatchIDsCheckedAndGeneratorAdvanced(t *testing.T) {
	f := newFollower(4)
	in := leaderWrite(t, 4, 1, Position{NextID: FirstID(1)}, "a", "b", "c")
	for _, mut := range []func(*ReplicaWriteIn){
		func(w *ReplicaWriteIn) { w.Record.LogID++ },
		func(w *ReplicaWriteIn) { w.Record.LastMsgLogID-- },
		func(w *ReplicaWriteIn) { w.Record.MsgNum = 2 },
	} {
		bad := in
		mut(&bad)
		if d := f.Check(bad); d.Err == nil || d.Append {
			t.Fatalf("mismatched IDs accepted: %+v", bad.Record)
		}
	}
	apply(t, f, in)
	if f.Position().NextID <= uint64(in.Record.LastMsgLogID) {
		t.Fatalf("next ID %d not past %d", f.Position().NextID, in.Record.LastMsgLogID)
	}
}

// 9. When a majority cannot acknowledge before the write timeout, the
// leader rolls the write (and every later one) back, disables writes and
// leaves the ISR; with a majority failing outright it does so at once.
func TestBehaviour09NoMajorityRollsBackAndStepsDown(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		w := threeReplicaWriter()
		w1 := writeOne(t, w, "a", t0)
		writeOne(t, w, "b", t0)
		if r := w.Tick(t0.Add(4 * time.Second)); r.LeaveISR || len(r.Replies) != 0 || len(r.ShrinkISR) != 0 {
			t.Fatalf("no majority yet, but acted: %+v", r)
		}
		r := w.Tick(t0.Add(5 * time.Second))
		if !r.LeaveISR || r.Truncate == nil || *r.Truncate != w1.Record.MsgOffset || len(r.Replies) != 2 || w.Writable() {
			t.Fatalf("timeout: %+v", r)
		}
	})
	t.Run("majority refused", func(t *testing.T) {
		w := threeReplicaWriter()
		w1 := writeOne(t, w, "a", t0)
		w.Acked("n2", w1.Record.LogID, errors.New("offset mismatch"))
		r := w.FollowerDown("n3")
		if !r.LeaveISR || r.Truncate == nil || len(r.Replies) != 1 || r.Replies[0].Err == nil {
			t.Fatalf("two of three failed: %+v", r)
		}
	})
}

// 10. A majority acknowledged but not everyone: the missing followers leave
// the ISR (no epoch change) and the write completes on the smaller ISR once
// that is durable. A slow follower is given --isr-shrink-after; one known
// to be down is removed at once.
func TestBehaviour10MajorityShrinksISRAndCompletes(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	if r := w.Tick(t0.Add(999 * time.Millisecond)); len(r.ShrinkISR) != 0 {
		t.Fatal("shrank a slow follower before --isr-shrink-after")
	}
	r := w.Tick(t0.Add(time.Second))
	if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
		t.Fatalf("shrink %+v", r)
	}
	if r := w.Tick(t0.Add(1100 * time.Millisecond)); len(r.ShrinkISR) != 0 {
		t.Fatal("asked twice while the first shrink is in progress")
	}
	r = w.ISRShrunk(nil)
	if len(r.Commits) != 1 || len(r.Replies) != 1 || r.Replies[0].Err != nil {
		t.Fatalf("write did not complete on the smaller ISR: %+v", r)
	}
	if f := w.Followers(); len(f) != 1 || f[0] != "n2" {
		t.Fatalf("followers %v", f)
	}
	next := writeOne(t, w, "b", t0.Add(2*time.Second))
	if next.Record.Epoch != 4 {
		t.Fatal("ISR shrink changed the epoch")
	}
	if r := w.Acked("n2", next.Record.LogID, nil); len(r.Commits) != 1 {
		t.Fatal("write on the shrunk ISR did not commit with its one follower")
	}
}

func TestDownFollowerShrunkAtOnce(t *testing.T) {
	for _, order := range []string{"ack first", "down first"} {
		t.Run(order, func(t *testing.T) {
			w := threeReplicaWriter()
			wr := writeOne(t, w, "a", t0)
			var r Ready
			if order == "ack first" {
				w.Acked("n2", wr.Record.LogID, nil)
				r = w.FollowerDown("n3")
			} else {
				if r = w.FollowerDown("n3"); len(r.ShrinkISR) != 0 {
					t.Fatal("shrank before a majority acknowledged")
				}
				r = w.Acked("n2", wr.Record.LogID, nil)
			}
			if len(r.ShrinkISR) != 1 || r.ShrinkISR[0] != "n3" {
				t.Fatalf("shrink %+v", r)
			}
			if r := w.ISRShrunk(nil); len(r.Commits) != 1 {
				t.Fatal("write did not complete")
			}
		})
	}
}

// A failed metadata update leaves the ISR as it was; the next tick retries.
func TestShrinkRetriedAfterFailedUpdate(t *testing.T) {
	w := threeReplicaWriter()
	wr := writeOne(t, w, "a", t0)
	w.Acked("n2", wr.Record.LogID, nil)
	w.Tick(t0.Add(time.Second))
	if r := w.ISRShrunk(errors.New("cas conflict")); len(r.Commits) != 0 {
		t.Fatal("committed although the ISR did not shrink")
	}
	if r := w.Tick(t0.Add(1200 * time.Millisecond)); len(r.ShrinkISR) != 1 {
		t.Fatalf("no retry: %+v", r)
	}
}

// 16. IDs strictly increase, carry the partition, and are never reused
// after a rollback.
func TestBehaviour16IDsNeverReused(t *testing.T) {
	w := threeReplicaWriter()
	w1 := writeOne(t, w, "a", t0)
	w.Tick(t0.Add(5 * time.Second))
	w.Enable()
	w2 := writeOne(t, w, "b", t0.Add(6*time.Second))
	if w2.Record.LogID <= w1.Record.LastMsgLogID || PartitionOf(uint64(w2.Record.LogID)) != 1 {
		t.Fatalf("ID %d after rolled-back %d", w2.Record.LogID, w1.Record.LastMsgLogID)
	}
	if w2.Record.MsgOffset != w1.Record.MsgOffset {
		t.Fatal("rolled-back bytes not reused")
	}
}

// testFollower is a follower core over an in-memory commit log.
type testFollower struct {
	*Follower
	log []storage.CommitRecord
}

func newFollower(epoch int64) *testFollower {
	tf := &testFollower{}
	tf.Follower = NewFollower(epoch, Position{NextID: FirstID(1)}, func(id int64) (storage.CommitRecord, int64, bool) {
		for i, r := range tf.log {
			if r.LogID == id {
				return r, int64(i), true
			}
		}
		return storage.CommitRecord{}, 0, false
	})
	return tf
}

// leaderWrite builds what a leader at pos would send for bodies.
func leaderWrite(t *testing.T, epoch int64, partition int32, pos Position, bs ...string) ReplicaWriteIn {
	t.Helper()
	w := NewWriter(WriterConfig{Partition: partition, Epoch: epoch, Replicas: 1}, pos)
	offer(t, w, "x", bs...)
	wr := w.NextWrite(t0)
	return ReplicaWriteIn{EpochForWrite: epoch, Record: wr.Record, Prev: wr.Prev, Data: wr.Data}
}

// after is the leader position just past in.
func after(in ReplicaWriteIn) Position {
	r := in.Record
	return Position{NextID: uint64(r.LastMsgLogID) + 1, End: r.End(), Count: r.LastCount(), Last: Ref(r)}
}

func apply(t *testing.T, f *testFollower, in ReplicaWriteIn) ApplyDecision {
	t.Helper()
	d := f.Check(in)
	if !d.Append {
		t.Fatalf("not applied: %+v", d)
	}
	if d.Truncate != nil {
		f.log = f.log[:d.Truncate.Records]
		f.Truncated(*d.Truncate)
	}
	f.Applied(in.Record, nil)
	f.log = append(f.log, in.Record)
	return d
}

// A write must follow the record before it in the leader's log: a follower
// that lacks that record refuses the write so the leader catches it up; one
// that has it but not as its last cuts what follows it, which the leader
// never committed.
func TestFollowerAppendsOnlyAfterTheLeadersPreviousRecord(t *testing.T) {
	f := newFollower(2)
	a := leaderWrite(t, 1, 1, Position{NextID: FirstID(1)}, "a")
	a.EpochForWrite = 2
	apply(t, f, a)
	stale := leaderWrite(t, 1, 1, after(a), "stale")
	stale.EpochForWrite = 2
	apply(t, f, stale)

	// The epoch-2 leader wrote b after a; stale never reached it.
	b := leaderWrite(t, 2, 1, after(a), "b")
	d := apply(t, f, b)
	if d.Truncate == nil || d.Truncate.Records != 1 || d.Truncate.Pos.End != a.Record.End() {
		t.Fatalf("cut %+v, want back to after a", d.Truncate)
	}
	if f.Position().Last != Ref(b.Record) || f.Position().NextID <= uint64(stale.Record.LastMsgLogID) {
		t.Fatalf("position %+v after the cut: want last b and IDs past the cut record", f.Position())
	}

	// A write after a record this follower never had is refused, not cut.
	missing := leaderWrite(t, 2, 1, after(leaderWrite(t, 2, 1, after(b), "gap")), "c")
	if d := f.Check(missing); d.Append || d.Err != ErrMissingPrev {
		t.Fatalf("write after a missing record: %+v", d)
	}
}

// A leader with an empty log probes with no record: an empty replica
// acknowledges it; one holding records cuts back to the start of its log,
// keeping its place in the ID sequence; one of a later epoch refuses a
// probe of an earlier one as a write of that epoch.
func TestFollowerAnswersAProbeOfAnEmptyLog(t *testing.T) {
	f := newFollower(2)
	if d := f.CheckEmpty(2); !d.Duplicate || d.Truncate != nil || d.Err != nil {
		t.Fatalf("empty replica: %+v, want acknowledged with nothing to cut", d)
	}
	if d := f.CheckEmpty(1); d.Err != ErrEpochMismatch || d.Kind != KindTemporary {
		t.Fatalf("probe of epoch 1 at a replica of epoch 2: %+v, want a temporary epoch refusal", d)
	}
	a := leaderWrite(t, 2, 1, Position{NextID: FirstID(1)}, "a", "b")
	apply(t, f, a)
	d := f.CheckEmpty(2)
	if !d.Duplicate || d.Append || d.Truncate == nil || d.Truncate.Records != 0 || d.Truncate.Pos.End != 0 || d.Truncate.Reset {
		t.Fatalf("replica holding a record: %+v, want it cut back to the start", d)
	}
	if d.Truncate.Pos.NextID <= uint64(a.Record.LastMsgLogID) {
		t.Fatalf("cut to next ID %d, want past %d: IDs the cut record used stay used", d.Truncate.Pos.NextID, a.Record.LastMsgLogID)
	}
	f.Truncated(*d.Truncate)
	if d := f.CheckEmpty(2); d.Truncate != nil {
		t.Fatalf("after the cut: %+v, want nothing more to cut", d)
	}
}
