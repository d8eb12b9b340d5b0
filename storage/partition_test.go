package storage

import (
	"errors"
	"testing"
	"time"
)

func TestSyncEvery(t *testing.T) {
	tests := []struct {
		syncEvery int
		commits   int
		wantSyncs int64
	}{
		{1, 5, 5},
		{3, 7, 2},
		{0, 10, 0}, // default 2500
	}
	for _, tt := range tests {
		p, _ := openTestPartition(t, t.TempDir(), Options{SyncEvery: tt.syncEvery})
		for range tt.commits {
			publish(t, p, "m")
		}
		if got := p.Syncs(); got != tt.wantSyncs {
			t.Errorf("SyncEvery %d after %d commits: %d syncs, want %d", tt.syncEvery, tt.commits, got, tt.wantSyncs)
		}
	}
}

func TestSyncDue(t *testing.T) {
	p, _ := openTestPartition(t, t.TempDir(), Options{SyncEvery: 100, SyncTimeout: time.Second})
	far := time.Now().Add(time.Hour)
	if p.SyncDue(far) {
		t.Fatal("sync due with nothing committed")
	}
	before := time.Now()
	publish(t, p, "a")
	publish(t, p, "b")
	after := time.Now()
	if p.SyncDue(after) {
		t.Fatal("sync due right after a commit")
	}
	if p.SyncDue(before.Add(time.Second - time.Nanosecond)) {
		t.Fatal("sync due before the timeout")
	}
	if !p.SyncDue(after.Add(time.Second)) {
		t.Fatal("sync not due after the timeout since the first unsynced commit")
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if p.SyncDue(far) || p.Syncs() != 1 {
		t.Fatalf("after Sync: due %v, syncs %d", p.SyncDue(far), p.Syncs())
	}
}

func TestSyncDeadline(t *testing.T) {
	p, _ := openTestPartition(t, t.TempDir(), Options{SyncEvery: 100, SyncTimeout: time.Second})
	if at, ok := p.SyncDeadline(); ok {
		t.Fatalf("deadline %v with nothing committed", at)
	}
	before := time.Now()
	publish(t, p, "a")
	after := time.Now()
	publish(t, p, "b")
	at, ok := p.SyncDeadline()
	if !ok || at.Before(before.Add(time.Second)) || at.After(after.Add(time.Second)) {
		t.Fatalf("deadline %v (%v), want a second after the first unsynced commit, in [%v, %v]", at, ok, before.Add(time.Second), after.Add(time.Second))
	}
	if !p.SyncDue(at) || p.SyncDue(at.Add(-time.Nanosecond)) {
		t.Fatal("SyncDue disagrees with SyncDeadline")
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := p.SyncDeadline(); ok {
		t.Fatal("deadline after Sync")
	}
}

func TestPartitionCommit(t *testing.T) {
	dir := t.TempDir()
	p, rec := openTestPartition(t, dir, Options{})
	if rec.Changed() {
		t.Fatalf("fresh partition recovered %v", rec)
	}
	if end, count := p.Committed(); end != 0 || count != 0 {
		t.Fatalf("fresh partition committed (%d, %d)", end, count)
	}
	publish(t, p, "a", "b", "c")
	r := publish(t, p, "d")
	if end, count := p.Committed(); end != r.End() || count != 4 {
		t.Fatalf("committed (%d, %d), want (%d, 4)", end, count, r.End())
	}
	pending := appendBatch(t, p, "e")
	beyond := pending
	beyond.MsgSize++
	if err := p.Commit(beyond); !errors.Is(err, ErrInvalidCommit) {
		t.Fatalf("commit past log end = %v, want ErrInvalidCommit", err)
	}
	if err := p.Commit(pending); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(pending); !errors.Is(err, ErrClosed) {
		t.Fatalf("commit after close = %v, want ErrClosed", err)
	}

	p, rec = openTestPartition(t, dir, Options{})
	if rec.Changed() {
		t.Fatalf("clean reopen recovered %v", rec)
	}
	if end, count := p.Committed(); end != pending.End() || count != 5 {
		t.Fatalf("after reopen committed (%d, %d), want (%d, 5)", end, count, pending.End())
	}
	checkConsistent(t, p)
}

func TestOpenPartitionBadOptions(t *testing.T) {
	for _, opt := range []Options{{SegmentBytes: -1}, {SyncEvery: -1}, {SyncTimeout: -time.Second}} {
		if _, _, err := OpenPartition(t.TempDir(), opt); err == nil {
			t.Errorf("OpenPartition accepted %+v", opt)
		}
	}
}
