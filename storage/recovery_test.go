package storage

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// Six committed batches of two 50-byte messages in 250-byte segments:
// segments at 0, 200 and 400, log end 600.
const (
	recoveryBatches  = 6
	recoveryBatchLen = 100
	recoverySegBytes = 250
)

func setupRecovery(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	p, _, err := OpenPartition(dir, Options{SegmentBytes: recoverySegBytes})
	if err != nil {
		t.Fatal(err)
	}
	body := string(make([]byte, 50-minRecordSize))
	for range recoveryBatches {
		if r := publish(t, p, body, body); r.MsgSize != recoveryBatchLen {
			t.Fatalf("batch of %d bytes, test assumes %d", r.MsgSize, recoveryBatchLen)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func lastCommitRecord(t *testing.T, dir string) CommitRecord {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, commitLogName))
	if err != nil {
		t.Fatal(err)
	}
	return UnmarshalCommitRecord(b[len(b)-CommitRecordSize:])
}

func rewriteLastCommitRecord(t *testing.T, dir string, f func(r *CommitRecord)) {
	t.Helper()
	path := filepath.Join(dir, commitLogName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := UnmarshalCommitRecord(b[len(b)-CommitRecordSize:])
	f(&r)
	r.Marshal(b[len(b)-CommitRecordSize:])
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func segPath(dir string, base int64) string { return filepath.Join(dir, segmentName(base)) }

func TestRecovery(t *testing.T) {
	commitLog := func(dir string) string { return filepath.Join(dir, commitLogName) }
	tests := []struct {
		name    string
		corrupt func(t *testing.T, dir string)
		want    Recovery // DropReason is only checked for being set
		commits int64
		start   int64
		end     int64
	}{
		{"clean", func(*testing.T, string) {}, Recovery{}, 6, 0, 600},
		{"fresh directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}, Recovery{}, 0, 0, 0},
		{"torn commit record", func(t *testing.T, dir string) {
			appendToFile(t, commitLog(dir), []byte("0123456789abcdefghij"))
		}, Recovery{TruncatedCommitBytes: 20}, 6, 0, 600},
		{"zero-padded commit log", func(t *testing.T, dir string) {
			appendToFile(t, commitLog(dir), make([]byte, 3*CommitRecordSize+7))
		}, Recovery{TruncatedCommitBytes: 7, DroppedRecords: 3}, 6, 0, 600},
		{"zero-padded segment tail", func(t *testing.T, dir string) {
			appendToFile(t, segPath(dir, 400), make([]byte, 4096))
		}, Recovery{TruncatedLogBytes: 4096}, 6, 0, 600},
		{"zero-padded older segment", func(t *testing.T, dir string) {
			appendToFile(t, segPath(dir, 0), make([]byte, 50))
		}, Recovery{TruncatedLogBytes: 50}, 6, 0, 600},
		{"record beyond log end", func(t *testing.T, dir string) {
			last := lastCommitRecord(t, dir)
			next := CommitRecord{LogID: last.LastMsgLogID + 1, Epoch: 1, LastMsgLogID: last.LastMsgLogID + 2,
				MsgOffset: last.End(), MsgSize: recoveryBatchLen, MsgCnt: last.LastCount() + 1, MsgNum: 2}
			b := make([]byte, CommitRecordSize)
			next.Marshal(b)
			appendToFile(t, commitLog(dir), b)
		}, Recovery{DroppedRecords: 1}, 6, 0, 600},
		{"uncommitted tail", func(t *testing.T, dir string) {
			appendToFile(t, segPath(dir, 400), encodeN(100, 3, 5))
		}, Recovery{TruncatedLogBytes: 3 * (minRecordSize + 5)}, 6, 0, 600},
		{"corrupt last message", func(t *testing.T, dir string) {
			f, err := os.OpenFile(segPath(dir, 400), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// The ID of the last message: a non-hex byte.
			if _, err := f.WriteAt([]byte{'z'}, 200-50+sizePrefix+10); err != nil {
				t.Fatal(err)
			}
		}, Recovery{DroppedRecords: 1, TruncatedLogBytes: 100}, 5, 0, 500},
		{"last record names other IDs", func(t *testing.T, dir string) {
			rewriteLastCommitRecord(t, dir, func(r *CommitRecord) { r.LastMsgLogID++ })
		}, Recovery{DroppedRecords: 1, TruncatedLogBytes: 100}, 5, 0, 500},
		{"last record miscounts messages", func(t *testing.T, dir string) {
			rewriteLastCommitRecord(t, dir, func(r *CommitRecord) { r.MsgNum = 3 })
		}, Recovery{DroppedRecords: 1, TruncatedLogBytes: 100}, 5, 0, 500},
		{"last record has no messages", func(t *testing.T, dir string) {
			rewriteLastCommitRecord(t, dir, func(r *CommitRecord) { r.MsgNum = 0 })
		}, Recovery{DroppedRecords: 1, TruncatedLogBytes: 100}, 5, 0, 500},
		{"last record leaves a gap", func(t *testing.T, dir string) {
			rewriteLastCommitRecord(t, dir, func(r *CommitRecord) { r.MsgOffset += 50; r.MsgSize -= 50; r.MsgNum = 1; r.LogID++ })
		}, Recovery{DroppedRecords: 1, TruncatedLogBytes: 100}, 5, 0, 500},
		{"zero-filled tail of an older segment", func(t *testing.T, dir string) {
			// The newer segment and the commit log reached the disk, the
			// last message of the middle segment did not.
			f, err := os.OpenFile(segPath(dir, 200), os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(make([]byte, 50), 150); err != nil {
				t.Fatal(err)
			}
		}, Recovery{DroppedRecords: 3, TruncatedLogBytes: 300}, 3, 0, 300},
		{"missing middle segment", func(t *testing.T, dir string) {
			if err := os.Remove(segPath(dir, 200)); err != nil {
				t.Fatal(err)
			}
		}, Recovery{DroppedRecords: 4, TruncatedLogBytes: 200, RemovedSegments: 1}, 2, 0, 200},
		{"missing last segment", func(t *testing.T, dir string) {
			if err := os.Remove(segPath(dir, 400)); err != nil {
				t.Fatal(err)
			}
		}, Recovery{DroppedRecords: 2}, 4, 0, 400},
		{"missing first segment", func(t *testing.T, dir string) {
			if err := os.Remove(segPath(dir, 0)); err != nil {
				t.Fatal(err)
			}
		}, Recovery{}, 6, 200, 600},
		{"all segments missing", func(t *testing.T, dir string) {
			for _, base := range []int64{0, 200, 400} {
				if err := os.Remove(segPath(dir, base)); err != nil {
					t.Fatal(err)
				}
			}
		}, Recovery{DroppedRecords: 6}, 0, 0, 0},
		{"commit log missing", func(t *testing.T, dir string) {
			if err := os.Remove(commitLog(dir)); err != nil {
				t.Fatal(err)
			}
		}, Recovery{TruncatedLogBytes: 600}, 0, 0, 0},
		{"commit log garbage", func(t *testing.T, dir string) {
			b := make([]byte, 4*CommitRecordSize+5)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			if err := os.WriteFile(commitLog(dir), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, Recovery{TruncatedCommitBytes: 5, DroppedRecords: 4, TruncatedLogBytes: 600}, 0, 0, 0},
		{"padding in both files", func(t *testing.T, dir string) {
			appendToFile(t, commitLog(dir), make([]byte, 100))
			appendToFile(t, segPath(dir, 400), make([]byte, 1000))
		}, Recovery{TruncatedCommitBytes: 4, DroppedRecords: 2, TruncatedLogBytes: 1000}, 6, 0, 600},
		{"stray files ignored", func(t *testing.T, dir string) {
			for _, name := range []string{"1.log", "notes.txt", "0000000000000000000x.log"} {
				appendToFile(t, filepath.Join(dir, name), []byte("junk"))
			}
		}, Recovery{}, 6, 0, 600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := setupRecovery(t)
			tt.corrupt(t, dir)
			p, rec := openTestPartition(t, dir, Options{SegmentBytes: recoverySegBytes})
			if (rec.DropReason != "") != (tt.want.DroppedRecords > 0) {
				t.Errorf("drop reason %q with %d dropped records", rec.DropReason, rec.DroppedRecords)
			}
			rec.DropReason = ""
			if rec != tt.want {
				t.Errorf("recovery %+v, want %+v", rec, tt.want)
			}
			if got := p.Commits.Count(); got != tt.commits {
				t.Errorf("%d commit records, want %d", got, tt.commits)
			}
			if p.Log.Start() != tt.start || p.Log.End() != tt.end {
				t.Errorf("log [%d, %d), want [%d, %d)", p.Log.Start(), p.Log.End(), tt.start, tt.end)
			}
			checkConsistent(t, p)

			// The repaired partition takes writes and reopens clean.
			r := publish(t, p, "after recovery")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			p, rec = openTestPartition(t, dir, Options{SegmentBytes: recoverySegBytes})
			if rec.Changed() {
				t.Errorf("second open recovered again: %v", rec)
			}
			if end, _ := p.Committed(); end != r.End() {
				t.Errorf("after reopen committed end %d, want %d", end, r.End())
			}
			checkConsistent(t, p)
		})
	}
}

func TestRecoveryIOError(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, commitLogName), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenPartition(dir, Options{}); err == nil {
		t.Fatal("opened a partition whose commit log is a directory")
	}
	file := filepath.Join(dir, "file")
	appendToFile(t, file, []byte("x"))
	if _, _, err := OpenPartition(file, Options{}); err == nil {
		t.Fatal("opened a partition in a regular file")
	}
}
