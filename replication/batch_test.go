package replication

import (
	"reflect"
	"testing"

	"github.com/partitamq/partita/messages"
)

func TestBatchedPacksInOrderUpToTheLimit(t *testing.T) {
	logIDs := func(frames []*messages.LeaderFrame) (out [][]int64) {
		for _, f := range frames {
			var ids []int64
			for _, inner := range append([]*messages.LeaderFrame{f}, f.GetBatch().GetFrames()...) {
				if w := inner.GetWrite(); w != nil {
					ids = append(ids, w.GetRecord().GetLogId())
				}
			}
			out = append(out, ids)
		}
		return out
	}
	small := func(id int64) *messages.LeaderFrame { return writeFrame(id, 100) }
	big := func(id int64) *messages.LeaderFrame { return writeFrame(id, maxBatchBytes/2) }
	huge := func(id int64) *messages.LeaderFrame { return writeFrame(id, maxBatchBytes+1) }
	for _, tc := range []struct {
		name string
		in   []*messages.LeaderFrame
		want [][]int64
	}{
		{"none", nil, nil},
		{"one frame stays as it is", []*messages.LeaderFrame{small(1)}, [][]int64{{1}}},
		{"small frames share a batch", []*messages.LeaderFrame{small(1), small(2), small(3)}, [][]int64{{1, 2, 3}}},
		{"a batch ends before the limit", []*messages.LeaderFrame{big(1), big(2), small(3)}, [][]int64{{1}, {2, 3}}},
		{"a frame over the limit goes alone", []*messages.LeaderFrame{small(1), huge(2), small(3)}, [][]int64{{1}, {2}, {3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := batched(tc.in, leaderBatch)
			if got := logIDs(out); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("messages %v, want %v", got, tc.want)
			}
			for i, f := range out {
				if b := f.GetBatch(); b != nil && len(b.GetFrames()) < 2 {
					t.Fatalf("message %d is a batch of %d", i, len(b.GetFrames()))
				}
			}
		})
	}
}
