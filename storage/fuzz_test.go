package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenPartition puts arbitrary bytes after the first keep records of a
// valid commit log and after the last segment's data: opening must neither
// fail nor panic, and must leave a consistent partition that reopens clean.
func FuzzOpenPartition(f *testing.F) {
	valid := CommitRecord{LogID: 7, Epoch: 1, LastMsgLogID: 7, MsgOffset: 600, MsgSize: 40, MsgCnt: 13, MsgNum: 1}
	validBytes := make([]byte, CommitRecordSize)
	valid.Marshal(validBytes)
	f.Add(uint8(6), []byte{}, []byte{})
	f.Add(uint8(6), make([]byte, 100), make([]byte, 4096))
	f.Add(uint8(3), []byte("torn"), encodeN(7, 1, 10))
	f.Add(uint8(6), validBytes, encodeN(13, 1, 10))
	f.Add(uint8(0), validBytes[:47], []byte{0, 0, 0, 26})
	f.Add(uint8(255), []byte{0xff, 0xff}, []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, keep uint8, commitTail, segmentTail []byte) {
		dir := setupRecovery(t)
		commitPath := filepath.Join(dir, commitLogName)
		b, err := os.ReadFile(commitPath)
		if err != nil {
			t.Fatal(err)
		}
		n := min(int(keep), len(b)/CommitRecordSize)
		b = append(b[:n*CommitRecordSize], commitTail...)
		if err := os.WriteFile(commitPath, b, 0o644); err != nil {
			t.Fatal(err)
		}
		appendToFile(t, segPath(dir, 400), segmentTail)

		p, _ := openTestPartition(t, dir, Options{SegmentBytes: recoverySegBytes})
		checkConsistent(t, p)
		end, count := p.Committed()
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		p, rec := openTestPartition(t, dir, Options{SegmentBytes: recoverySegBytes})
		if rec.Changed() {
			t.Fatalf("second open recovered again: %v", rec)
		}
		if e, c := p.Committed(); e != end || c != count {
			t.Fatalf("second open committed (%d, %d), first (%d, %d)", e, c, end, count)
		}
	})
}

// FuzzChannelStateLoad feeds arbitrary bytes as a state file: loading must
// return a state or ErrCorruptState, never panic.
func FuzzChannelStateLoad(f *testing.F) {
	f.Add(ChannelState{Confirmed: 3, Intervals: manyIntervals(2)}.marshal())
	f.Add(append(ChannelState{Confirmed: 3, Intervals: manyIntervals(2)}.marshalSlot(7), "older tail"...))
	f.Add([]byte("PCST"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, channelsDir), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, channelsDir, "c"+stateSuffix), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, found, err := LoadChannelState(dir, "c")
		if found == (len(b) == 0) {
			t.Fatalf("%d bytes: found %v; only an empty file is none", len(b), found)
		}
		if err != nil && !errors.Is(err, ErrCorruptState) {
			t.Fatalf("error %v does not wrap ErrCorruptState", err)
		}
		if err == nil {
			if verr := s.validate(); verr != nil {
				t.Fatalf("loaded an invalid state: %v", verr)
			}
		}
	})
}
