package storage

import (
	"errors"
	"os"
	"testing"
	"time"
)

// retentionLog is searchLog with one record per segment (each record is
// about 90 bytes; segments hold 100).
func retentionLog(t *testing.T) (*Partition, string) {
	t.Helper()
	dir := t.TempDir()
	p, _ := openTestPartition(t, dir, Options{SegmentBytes: 100})
	for range 5 {
		publish(t, p, "aaaa", "bbbb")
	}
	if len(p.Log.segs) != 5 || p.Log.Segments() != 5 {
		t.Fatalf("%d segments, want one per record", len(p.Log.segs))
	}
	return p, dir
}

func recordStarts(t *testing.T, p *Partition) map[int64]bool {
	out := map[int64]bool{}
	for i := range p.Commits.Count() {
		r, err := p.Commits.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		out[r.MsgOffset] = true
	}
	return out
}

// Retention by size deletes whole segments, only before the channels'
// confirmed offset, never the active one, and the log starts on a record.
func TestRetentionBySizeStopsAtConfirmed(t *testing.T) {
	p, _ := retentionLog(t)
	starts := recordStarts(t, p)
	r2, _ := p.Commits.Record(2)
	n, bytes, err := p.Retain(RetentionPolicy{MaxBytes: 1}, r2.MsgOffset+1, time.Now())
	if err != nil || n != 2 || bytes != r2.MsgOffset {
		t.Fatalf("Retain = %d segments %d bytes %v; want the 2 before record 2 (%d bytes)", n, bytes, err, r2.MsgOffset)
	}
	if p.Log.Start() != r2.MsgOffset || !starts[p.Log.Start()] {
		t.Fatalf("log starts at %d, want record 2 at %d", p.Log.Start(), r2.MsgOffset)
	}
	// Everything confirmed: all but the active segment go.
	end, _ := p.Committed()
	n, _, err = p.Retain(RetentionPolicy{MaxBytes: 1}, end, time.Now())
	last, _ := p.Commits.Last()
	if err != nil || n != 2 || p.Log.Start() != last.MsgOffset || p.Log.Segments() != 1 {
		t.Fatalf("Retain = %d, %v; log starts at %d, want the active segment at %d", n, err, p.Log.Start(), last.MsgOffset)
	}
	if _, err := p.Locate(ByCount, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a deleted message was found: %v", err)
	}
	if off, count, err := p.Seek(ByCount, 0); err != nil || off != last.MsgOffset || count != last.MsgCnt-1 {
		t.Fatalf("Seek before the start = %d, %d, %v; want the first retained message", off, count, err)
	}
	if l, err := p.Locate(ByCount, last.MsgCnt-1); err != nil || string(l.Body) != "aaaa" {
		t.Fatalf("retained message: %+v %v", l, err)
	}
}

// Retention by age deletes segments last written before the limit, oldest
// first, and the log reopens from its new start.
func TestRetentionByAgeAndReopen(t *testing.T) {
	p, dir := retentionLog(t)
	now := time.Now()
	old := now.Add(-10 * 24 * time.Hour)
	for i, s := range p.Log.segs {
		at := now
		if i != 1 && i < 3 {
			at = old // segment 1 is young, so only segment 0 may go
		}
		if err := os.Chtimes(s.file.Name(), at, at); err != nil {
			t.Fatal(err)
		}
	}
	end, _ := p.Committed()
	n, _, err := p.Retain(RetentionPolicy{MaxAge: 7 * 24 * time.Hour}, end, now)
	if err != nil || n != 1 {
		t.Fatalf("Retain = %d, %v; want only the first segment", n, err)
	}
	start := p.Log.Start()
	p.Close()
	bases, err := listSegments(dir)
	if err != nil || len(bases) != 4 {
		t.Fatalf("%d segment files after retention (%v), want 4", len(bases), err)
	}
	p2, rec := openTestPartition(t, dir, Options{SegmentBytes: 100})
	if rec.Changed() || p2.Log.Start() != start {
		t.Fatalf("reopened: recovery %v, start %d, want %d", rec, p2.Log.Start(), start)
	}
	publish(t, p2, "after")
}
