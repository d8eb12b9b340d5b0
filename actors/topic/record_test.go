package topic

import (
	"testing"

	"github.com/partitamq/partita/storage"
)

// A traced publish and a channel-delayed copy coalesced with a plain publish
// keep their extensions, and each reply says where its own messages went.
func TestPublishExtensionsAndSpans(t *testing.T) {
	w := NewWriter(WriterConfig{Partition: 2, Replicas: 1}, Position{End: 100, Count: 3, NextID: FirstID(2) + 3})
	offer(t, w, "plain", "p")
	if r := w.Offer(Publish{Bodies: bodies("t1", "t2"), Traces: []uint64{11, 12}, Token: "traced"}); r != nil {
		t.Fatal(r.Err)
	}
	copyOf := &DelayedCopy{Channel: "ch", OrigID: 9, Attempts: 4}
	if r := w.Offer(Publish{Bodies: bodies("d"), DeliverAt: 5e18, Delayed: copyOf, Token: "delayed"}); r != nil {
		t.Fatal(r.Err)
	}
	wr := w.NextWrite(t0)
	r := w.LocalWritten(wr.Record.LogID, nil)
	equalTokens(t, r.Replies, "plain", "traced", "delayed")

	var msgs []storage.Message
	var offsets []int64
	data, off := wr.Data, int64(100)
	for len(data) > 0 {
		m, n, err := storage.DecodeMessage(data)
		if err != nil {
			t.Fatal(err)
		}
		msgs, offsets = append(msgs, m), append(offsets, off)
		data, off = data[n:], off+int64(n)
	}
	if len(msgs) != 4 || msgs[0].TraceID != 0 || msgs[1].TraceID != 11 || msgs[2].TraceID != 12 {
		t.Fatalf("messages %+v", msgs)
	}
	if d := msgs[3]; d.DelayedChannel != "ch" || d.DelayedOrigID != 9 || d.DelayedAttempts != 4 || d.DeliverAt != 5e18 {
		t.Fatalf("delayed copy %+v", d)
	}
	want := []struct {
		id     uint64
		offset int64
		end    int64
	}{{msgs[0].ID, offsets[0], offsets[1]}, {msgs[1].ID, offsets[1], offsets[3]}, {msgs[3].ID, offsets[3], off}}
	for i, rep := range r.Replies {
		if rep.MsgID != want[i].id || rep.Offset != want[i].offset || rep.Offset+int64(rep.Size) != want[i].end || rep.FirstID != uint64(wr.Record.LogID) {
			t.Fatalf("reply %d = %+v, want %+v", i, rep, want[i])
		}
	}
}
