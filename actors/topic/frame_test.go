package topic_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
)

// leaderWrites makes a leader's next n writes of one message each, as
// its replica actors send them, with a Writer of its own.
type leaderWrites struct {
	w *topic.Writer
}

func newLeaderWrites() *leaderWrites {
	cfg := topic.WriterConfig{Epoch: 1, Replicas: 2, Followers: []string{"n2"}, Window: 1000, MaxBatchMessages: 1}
	return &leaderWrites{w: topic.NewWriter(cfg, topic.Position{})}
}

func (l *leaderWrites) next(t *testing.T, n int) []*messages.ReplicaWrite {
	t.Helper()
	var out []*messages.ReplicaWrite
	for range n {
		id := l.w.Position().NextID
		if r := l.w.Offer(topic.Publish{Bodies: [][]byte{[]byte(fmt.Sprint("m", id))}}); r != nil {
			t.Fatal(r.Err)
		}
		wr := l.w.NextWrite(time.Unix(1_700_000_000, 0))
		rec := wr.Record
		out = append(out, &messages.ReplicaWrite{
			Topic: "t", EpochForWrite: 1, Messages: wr.Data,
			Record: &messages.CommitRecord{LogId: rec.LogID, Epoch: rec.Epoch, LastMsgLogId: rec.LastMsgLogID, MsgOffset: rec.MsgOffset, MsgSize: rec.MsgSize, MsgCnt: rec.MsgCnt, MsgNum: rec.MsgNum},
			Prev:   &messages.RecordRef{LogId: wr.Prev.LogID, Epoch: wr.Prev.Epoch},
		})
	}
	return out
}

// apply hands the follower a frame and returns its answer.
func (f *faultyPartition) apply(ws []*messages.ReplicaWrite) []*messages.ReplicaAck {
	f.t.Helper()
	done := make(chan []*messages.ReplicaAck, 1)
	f.system.Root.Send(f.pid, &topic.ReplicaWritesArrived{Writes: ws, Reply: func(a []*messages.ReplicaAck) { done <- a }})
	select {
	case acks := <-done:
		return acks
	case <-time.After(10 * time.Second):
		f.t.Fatal("no answer to the frame within 10s")
		return nil
	}
}

type answer struct {
	logID  int64
	ok     bool
	behind bool
}

func answers(acks []*messages.ReplicaAck) []answer {
	var out []answer
	for _, a := range acks {
		out = append(out, answer{a.GetLogId(), a.GetCode() == "", a.GetBehind()})
	}
	return out
}

// A follower acknowledges of a frame exactly what it applied: the writes
// before one it refuses are written together and covered by one ack, the
// refused write and those after it are refused; a run the disk cannot
// take is refused whole and leaves the files as they were; the same
// writes sent again once the disk works are applied.
func TestFramePartlyAppliedIsAckedForWhatWasApplied(t *testing.T) {
	f := startFaulty(t, 1, func(o *topic.Options) {
		o.Node = "n2"
		o.Role = topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2}
	})
	l := newLeaderWrites()
	ws := l.next(t, 4)
	bad := *ws[2].GetRecord()
	bad.MsgSize++
	frame := slices.Clone(ws)
	frame[2] = &messages.ReplicaWrite{Topic: "t", EpochForWrite: 1, Messages: ws[2].GetMessages(), Record: &bad, Prev: ws[2].GetPrev()}
	id := func(i int) int64 { return ws[i].GetRecord().GetLogId() }

	got := answers(f.apply(frame))
	want := []answer{{id(1), true, false}, {id(2), false, false}, {id(3), false, true}}
	if !slices.Equal(got, want) {
		t.Fatalf("answer to a frame whose third write is bad: %+v, want %+v", got, want)
	}

	// The disk fills: the run of the two good writes cannot be written.
	f.fs.Fill(10)
	for _, a := range answers(f.apply(ws[2:])) {
		if a.ok {
			t.Fatalf("write %d acknowledged though the disk was full", a.logID)
		}
	}
	f.fs.Heal()
	more := l.next(t, 1)
	got = answers(f.apply(append(ws[2:], more...)))
	if want := []answer{{more[0].GetRecord().GetLogId(), true, false}}; !slices.Equal(got, want) {
		t.Fatalf("answer once the disk has room: %+v, want %+v", got, want)
	}
	if bodies, want := f.stop(), []string{"m1", "m2", "m3", "m4", "m5"}; !slices.Equal(bodies, want) {
		t.Fatalf("committed on disk %q, want %q", bodies, want)
	}
}
