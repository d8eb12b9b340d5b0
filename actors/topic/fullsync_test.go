package topic_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

// 15. A replica that lacks records whose data the leader already deleted
// (retention) takes the leader's log from its start instead: its log starts
// where the leader's does, and from there holds the same bytes and the same
// commit records.
func TestBehaviour15FullSyncFromTheLeadersLogStart(t *testing.T) {
	small := storage.Options{SegmentBytes: 256}
	c := newMemClusterFrom(t, 5*time.Second, 2, small, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < 40; i++ {
			history(t, store, 1, "an old message that fills segments")
		}
		if node == "n1" {
			end, _ := store.Committed()
			if n, _, err := store.Retain(storage.RetentionPolicy{MaxBytes: 600}, end, time.Now()); err != nil || n == 0 {
				t.Fatalf("retention deleted %d segments: %v", n, err)
			}
		}
	})
	leaderStart := c.stores["n1"].Log.Start()
	for i := 0; i < 3; i++ {
		if r := c.publish("new"); r.Err != nil {
			t.Fatalf("publish %d: %v", i, r.Err)
		}
	}
	if got := c.stores["n3"].Log.Start(); got != leaderStart {
		t.Fatalf("replica log starts at %d, the leader's at %d", got, leaderStart)
	}
	for _, n := range []string{"n1", "n3"} {
		c.system.Root.PoisonFuture(c.pids[n]).Wait()
	}
	leader, replica := segmentBytes(t, c.dirs["n1"]), segmentBytes(t, c.dirs["n3"])
	if !bytes.Equal(leader, replica) || len(replica) == 0 {
		t.Fatalf("replica's log (%d bytes from %d) differs from the leader's (%d bytes)", len(replica), leaderStart, len(leader))
	}
	lc, rc := readFile(t, filepath.Join(c.dirs["n1"], "commit.log")), readFile(t, filepath.Join(c.dirs["n3"], "commit.log"))
	if !bytes.HasSuffix(lc, rc) || len(rc) == 0 || len(rc) >= len(lc) {
		t.Fatalf("replica's commit log (%d bytes) is not a proper suffix of the leader's (%d)", len(rc), len(lc))
	}
}

// A replica that lacks a long log is caught up a chunk at a time, and ends
// with the leader's log.
func TestCatchUpOfALongLogConverges(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < 700; i++ { // more than two chunks
			history(t, store, 1, "m")
		}
	})
	if r := c.publish("new"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.stopAndCompare(t, "n2", "n3")
}
