package storage

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"
)

func startSyncer(t *testing.T, dir string, timeout time.Duration) *Syncer {
	t.Helper()
	s, err := NewSyncer(dir, timeout, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// With a Syncer, commits wait for the node's syncfs, not for fsyncs of
// their own, and the partition arms no timer for them.
func TestSyncerCoversThePartitionsCommits(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, 20*time.Millisecond)
	files := NewIdleFiles(nil)
	files.Syncer = s
	p, _ := openTestPartition(t, dir, Options{FS: files, Syncer: s, SyncTimeout: 20 * time.Millisecond})
	for range 10 {
		publish(t, p, "m")
	}
	if _, ok := p.SyncDeadline(); ok {
		t.Fatal("a partition covered by the syncer arms a sync deadline")
	}
	if p.Syncs() != 0 {
		t.Fatalf("%d fsyncs of the partition's own", p.Syncs())
	}
	eventually(t, "a syncfs covering the commits", func() bool { return s.Covered(p.coverGen) })
	p.noteCovered()
	if p.unsynced != 0 {
		t.Fatalf("%d commits still unsynced after the syncfs covered them", p.unsynced)
	}
	// Covered files give their descriptors back like synced ones.
	files.Sweep()
	files.Sweep()
	if files.Open() != 0 {
		t.Fatalf("%d files still open", files.Open())
	}
	checkConsistent(t, p)
}

// Nothing written, nothing synced: an idle node's syncer does not wake.
func TestIdleSyncerDoesNotSync(t *testing.T) {
	s := startSyncer(t, t.TempDir(), time.Millisecond)
	time.Sleep(50 * time.Millisecond) // a window in which nothing may happen
	if n := s.started.Load(); n != 0 {
		t.Fatalf("%d syncfs calls with nothing written", n)
	}
	gen := s.Written()
	eventually(t, "the write covered", func() bool { return s.Covered(gen) })
}

// Past --sync-every the partition asks the node's syncfs at once instead
// of fsyncing on its own turn: the commits are covered long before the
// timeout, with no fsync of its own.
func TestSyncEveryAsksTheSyncerAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, time.Hour)
	p, _ := openTestPartition(t, dir, Options{Syncer: s, SyncEvery: 5})
	for range 5 {
		publish(t, p, "m")
	}
	if p.syncs != 0 {
		t.Fatalf("%d fsyncs of the partition's own at --sync-every 5 with a syncer", p.syncs)
	}
	eventually(t, "the asked syncfs covering the commits", func() bool { return p.Syncs() == 1 })
	if p.unsynced != 0 || p.syncs != 0 {
		t.Fatalf("after the asked syncfs: %d commits unsynced, %d fsyncs of its own; want none", p.unsynced, p.syncs)
	}
	if n := s.started.Load(); n != 1 {
		t.Fatalf("%d syncfs calls for one ask", n)
	}
}

// A syncfs that does not come (here: the syncer never runs) holds the
// writes back once twice --sync-every commits wait: then the partition
// fsyncs them itself, so no more than that is ever unsynced.
func TestSyncEveryFsyncsItselfWhenTheSyncerFallsBehind(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSyncer(dir, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := openTestPartition(t, dir, Options{Syncer: s, SyncEvery: 5})
	for range 9 {
		publish(t, p, "m")
	}
	if p.Syncs() != 0 {
		t.Fatalf("%d fsyncs with 9 commits waiting at --sync-every 5, want none yet", p.Syncs())
	}
	publish(t, p, "m")
	if p.Syncs() != 1 || p.unsynced != 0 {
		t.Fatalf("10 commits waiting at --sync-every 5: %d fsyncs, %d unsynced; want 1 and 0", p.Syncs(), p.unsynced)
	}
}

// At --sync-every 1 each commit is synced before it is answered: its own
// fsync, syncer or not.
func TestSyncEveryOneStaysThePartitionsOwn(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, time.Hour)
	p, _ := openTestPartition(t, dir, Options{Syncer: s, SyncEvery: 1})
	for range 3 {
		publish(t, p, "m")
	}
	if p.Syncs() != 3 {
		t.Fatalf("%d fsyncs for 3 commits at --sync-every 1, want 3", p.Syncs())
	}
}

// After a failed syncfs each partition learns from an fsync of its own
// whether its files are safe.
func TestFailedSyncfsFallsBackToThePartitionsFsync(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, time.Hour)
	p, _ := openTestPartition(t, dir, Options{Syncer: s})
	publish(t, p, "a")
	err := errors.New("disk gone")
	s.failed.Store(&err)
	if _, ok := p.SyncDeadline(); !ok {
		t.Fatal("no sync deadline while the syncer fails")
	}
	publish(t, p, "b")
	if p.Syncs() != 1 {
		t.Fatalf("%d fsyncs of the partition's own after a failed syncfs, want 1", p.Syncs())
	}
}

// With a Syncer, a file with unsynced writes may give its descriptor back
// to make room, and its own Sync reopens it to fsync.
func TestDirtyFileClosedUnderASyncerStillSyncs(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, time.Hour)
	files := NewIdleFiles(nil)
	files.Syncer = s
	p, _ := openTestPartition(t, dir, Options{FS: files, Syncer: s, SyncEvery: 1000})
	publish(t, p, "a")
	files.Sweep()
	files.Sweep()
	if files.Open() != 0 {
		t.Fatalf("%d files open: unsynced files stay open under a syncer", files.Open())
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if files.Open() == 0 {
		t.Fatal("Sync of files closed with unsynced writes did not reopen them to fsync")
	}
	checkConsistent(t, p)
}

// A topic's syncdisk changes the fsync count of a partition already open,
// from its next commit; 0 goes back to the default.
func TestSetSyncEveryTakesEffectAtTheNextCommit(t *testing.T) {
	p, _ := openTestPartition(t, t.TempDir(), Options{SyncEvery: 5})
	for range 3 {
		publish(t, p, "m")
	}
	p.SetSyncEvery(2)
	publish(t, p, "m") // 4 unsynced, past the new count
	if p.Syncs() != 1 {
		t.Fatalf("%d fsyncs after lowering the count below the commits waiting, want 1", p.Syncs())
	}
	for range 4 {
		publish(t, p, "m")
	}
	if p.Syncs() != 3 {
		t.Fatalf("%d fsyncs for 4 more commits at 2, want 3", p.Syncs())
	}
	p.SetSyncEvery(0)
	if p.SyncEvery() != DefaultSyncEvery {
		t.Fatalf("SyncEvery %d after SetSyncEvery(0), want %d", p.SyncEvery(), DefaultSyncEvery)
	}
	for range 10 {
		publish(t, p, "m")
	}
	if p.Syncs() != 3 {
		t.Fatalf("%d fsyncs at the default count, want still 3", p.Syncs())
	}
}

// The kernel reports a failed write-back once: a syncfs that succeeds after
// one that failed says nothing of the writes made before the failure, so
// they are never counted as covered, and their writer must fsync itself.
func TestWritesBeforeAFailedSyncfsAreNeverCovered(t *testing.T) {
	dir := t.TempDir()
	s, err := NewSyncer(dir, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := s.dir
	t.Cleanup(func() { good.Close() })
	before := s.Written()
	bad, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	bad.Close()
	s.dir = bad
	s.syncOnce() // a closed descriptor: the syncfs fails
	if s.Err() == nil {
		t.Fatal("a syncfs on a closed descriptor succeeded")
	}
	s.dir = good
	s.syncOnce()
	if s.Err() != nil {
		t.Fatalf("syncfs: %v", s.Err())
	}
	if s.Covered(before) || !s.Failed(before) {
		t.Fatal("a write made before a failed syncfs counts as covered by the next one")
	}
	after := s.Written()
	s.syncOnce()
	if !s.Covered(after) || s.Failed(after) {
		t.Fatal("a write made after the failure is not covered by a later syncfs")
	}
}

// Segments rotated out before an ask are covered by its syncfs too: the
// partition's next fsync of its own does not go over them again.
func TestAnAskedSyncfsCoversTheSegmentsRotatedBeforeIt(t *testing.T) {
	dir := t.TempDir()
	s := startSyncer(t, dir, time.Hour)
	p, _ := openTestPartition(t, dir, Options{Syncer: s, SyncEvery: 5, SegmentBytes: 64})
	for range 5 {
		publish(t, p, "a message long enough to fill a small segment quickly")
	}
	if p.Log.rotatedUnsynced() == 0 {
		t.Fatal("no segment rotated out: the test needs smaller segments")
	}
	eventually(t, "the asked syncfs covering the commits", func() bool { return p.Syncs() == 1 })
	if n := p.Log.rotatedUnsynced(); n != 0 {
		t.Fatalf("%d rotated segments still waiting for a fsync after a syncfs covered them", n)
	}
	checkConsistent(t, p)
}
