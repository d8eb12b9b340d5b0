package topic_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// history writes records to a partition as a leader in epoch would, one
// record per body, after whatever the partition already holds.
func history(t *testing.T, store *storage.Partition, epoch int64, bodies ...string) {
	t.Helper()
	end, count := store.Committed()
	pos := topic.Position{NextID: topic.FirstID(0), End: end, Count: count}
	if last, ok := store.Commits.Last(); ok {
		pos.NextID, pos.Last = uint64(last.LastMsgLogID)+1, topic.Ref(last)
	}
	w := topic.NewWriter(topic.WriterConfig{Epoch: epoch, Replicas: 1, MaxBatchMessages: 1}, pos)
	for _, b := range bodies {
		if r := w.Offer(topic.Publish{Bodies: [][]byte{[]byte(b)}}); r != nil {
			t.Fatal(r.Err)
		}
		wr := w.NextWrite(time.Unix(1_700_000_000, 0)) // the same bytes on every node
		if _, err := store.Log.Append(wr.Data); err != nil {
			t.Fatal(err)
		}
		w.LocalWritten(wr.Record.LogID, nil)
		if err := store.Commit(wr.Record); err != nil {
			t.Fatal(err)
		}
	}
}

// 14. A replica that is ahead of the leader or diverged from it cuts its
// log back to the last record it shares with the leader, then takes what
// follows; afterwards its commit log equals the leader's.
func TestBehaviour14DivergedReplicaCutsBackAndConverges(t *testing.T) {
	cases := map[string]func(t *testing.T, node string, store *storage.Partition){
		// n3 holds two records of a deposed epoch-1 leader that the others
		// never got; the epoch-2 leader has written since, reusing LogIDs.
		"diverged": func(t *testing.T, node string, store *storage.Partition) {
			history(t, store, 1, "a", "b")
			if node == "n3" {
				history(t, store, 1, "lost-1", "lost-2")
				return
			}
			history(t, store, 2, "c")
		},
		// n3 holds a record the others do not; nothing was written since.
		"ahead": func(t *testing.T, node string, store *storage.Partition) {
			history(t, store, 1, "a", "b")
			if node == "n3" {
				history(t, store, 1, "lost")
			}
		},
	}
	for name, prefill := range cases {
		t.Run(name, func(t *testing.T) {
			c := newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) { prefill(t, node, store) })
			for i := 0; i < 5; i++ {
				if r := c.publish("new", "batch"); r.Err != nil {
					t.Fatalf("publish %d: %v", i, r.Err)
				}
			}
			c.stopAndCompare(t, "n2", "n3")
			for _, n := range []string{"n2", "n3"} {
				if got, want := segmentBytes(t, c.dirs[n]), segmentBytes(t, c.dirs["n1"]); !bytes.Equal(got, want) {
					t.Fatalf("%s data log differs from the leader's (%d vs %d bytes)", n, len(got), len(want))
				}
			}
		})
	}
}

// segmentBytes is a partition's data log, its segments in order.
func segmentBytes(t *testing.T, dir string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "[0-9]*.log"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no segments in %s: %v", dir, err)
	}
	var b []byte
	for _, f := range files {
		b = append(b, readFile(t, f)...)
	}
	return b
}
