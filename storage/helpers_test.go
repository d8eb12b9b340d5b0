package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// publish appends bodies as one batch and commits it, as the partition actor does.
func publish(t testing.TB, p *Partition, bodies ...string) CommitRecord {
	t.Helper()
	r := appendBatch(t, p, bodies...)
	if err := p.Commit(r); err != nil {
		t.Fatalf("commit %+v: %v", r, err)
	}
	return r
}

// appendBatch appends bodies uncommitted and returns the record that would commit them.
func appendBatch(t testing.TB, p *Partition, bodies ...string) CommitRecord {
	t.Helper()
	last, _ := p.Commits.Last()
	firstID := last.LastMsgLogID + 1
	if end := p.Log.End(); end != last.End() {
		// Uncommitted messages already appended: continue after them.
		msgs := readAll(t, p.Log, last.End(), end)
		firstID = int64(msgs[len(msgs)-1].ID) + 1
	}
	var data []byte
	for i, b := range bodies {
		data = AppendMessage(data, &Message{ID: uint64(firstID) + uint64(i), Timestamp: 1700000000e9 + int64(i), Body: []byte(b)})
	}
	off, err := p.Log.Append(data)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	_, count := p.Committed()
	return CommitRecord{
		LogID: firstID, Epoch: 1, LastMsgLogID: firstID + int64(len(bodies)) - 1,
		MsgOffset: off, MsgSize: int32(len(data)), MsgCnt: count + 1, MsgNum: int32(len(bodies)),
	}
}

// readAll decodes every message in [off, end) with a deliberately small buffer.
func readAll(t testing.TB, l *Log, off, end int64) []StoredMessage {
	t.Helper()
	var all []StoredMessage
	buf := make([]byte, 64)
	for off < end {
		msgs, next, err := l.ReadMessages(off, end, buf)
		if err != nil {
			t.Fatalf("read messages at %d: %v", off, err)
		}
		for _, m := range msgs {
			m.Body = append([]byte(nil), m.Body...)
			all = append(all, m)
		}
		off = next
	}
	return all
}

// checkConsistent asserts the invariants recovery must establish.
func checkConsistent(t testing.TB, p *Partition) {
	t.Helper()
	end, count := p.Committed()
	if p.Commits.Count() == 0 {
		if p.Log.End() != p.Log.Start() {
			t.Fatalf("no commits but log holds [%d, %d)", p.Log.Start(), p.Log.End())
		}
		return
	}
	if p.Log.End() != end {
		t.Fatalf("log end %d, committed end %d", p.Log.End(), end)
	}
	first, err := p.Commits.Record(0)
	if err != nil {
		t.Fatal(err)
	}
	if first.MsgOffset < p.Log.Start() {
		return // the head of the log is gone; only the tail can be read
	}
	msgs := readAll(t, p.Log, first.MsgOffset, end)
	if got, want := int64(len(msgs)), count-first.MsgCnt+1; got != want {
		t.Fatalf("%d messages in committed range, want %d", got, want)
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].ID <= msgs[i-1].ID {
			t.Fatalf("message IDs not increasing at %d: %d after %d", i, msgs[i].ID, msgs[i-1].ID)
		}
	}
}

func openTestPartition(t testing.TB, dir string, opt Options) (*Partition, Recovery) {
	t.Helper()
	p, rec, err := OpenPartition(dir, opt)
	if err != nil {
		t.Fatalf("open partition: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("close: %v", err)
		}
	})
	return p, rec
}

func appendToFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func segmentPaths(t testing.TB, dir string) []string {
	t.Helper()
	bases, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, b := range bases {
		paths = append(paths, filepath.Join(dir, segmentName(b)))
	}
	return paths
}
