package storage

import (
	"errors"
	"fmt"
	"testing"
)

// searchLog commits 5 records of 3 messages each, message k (0-based) with
// ID 100+k, body "m<k>" and timestamp k seconds, and returns every message.
func searchLog(t *testing.T, opt Options) (*Partition, []StoredMessage) {
	t.Helper()
	p, _ := openTestPartition(t, t.TempDir(), opt)
	for r := range 5 {
		var data []byte
		for k := r * 3; k < r*3+3; k++ {
			data = AppendMessage(data, &Message{ID: uint64(100 + k), Timestamp: int64(k) * 1e9, Body: fmt.Appendf(nil, "m%d", k)})
		}
		off, err := p.Log.Append(data)
		if err != nil {
			t.Fatal(err)
		}
		rec := CommitRecord{LogID: int64(100 + r*3), Epoch: 1, LastMsgLogID: int64(100 + r*3 + 2), MsgOffset: off, MsgSize: int32(len(data)), MsgCnt: int64(r*3 + 1), MsgNum: 3}
		if err := p.Commit(rec); err != nil {
			t.Fatal(err)
		}
	}
	return p, readAll(t, p.Log, 0, p.Log.End())
}

func TestLocateEveryMode(t *testing.T) {
	p, msgs := searchLog(t, Options{})
	for k, m := range msgs {
		for _, tc := range []struct {
			mode SearchMode
			pos  int64
		}{
			{ByID, int64(100 + k)},
			{ByCount, int64(k)},
			{ByOffset, m.Offset},
			{ByOffset, m.Offset + int64(m.Size) - 1},
			{ByTime, int64(k) * 1e9},
			{ByTime, int64(k)*1e9 - 5e8},
		} {
			l, err := p.Locate(tc.mode, tc.pos)
			if err != nil || l.Offset != m.Offset || l.Count != int64(k) || string(l.Body) != fmt.Sprintf("m%d", k) {
				t.Fatalf("Locate(%d, %d) = %+v, %v; want message %d at %d", tc.mode, tc.pos, l, err, k, m.Offset)
			}
		}
	}
	for _, tc := range []struct {
		mode SearchMode
		pos  int64
	}{{ByID, 99}, {ByID, 115}, {ByCount, 15}, {ByOffset, p.Log.End()}, {ByTime, 15e9}} {
		if _, err := p.Locate(tc.mode, tc.pos); !errors.Is(err, ErrNotFound) {
			t.Errorf("Locate(%d, %d) err = %v, want ErrNotFound", tc.mode, tc.pos, err)
		}
	}
}

// Seek lands on a message boundary, clamping before the start and past the end.
func TestSeekClamps(t *testing.T) {
	p, msgs := searchLog(t, Options{})
	end := p.Log.End()
	for _, tc := range []struct {
		mode       SearchMode
		pos        int64
		off, count int64
	}{
		{ByCount, 4, msgs[4].Offset, 4},
		{ByCount, 100, end, 15},
		{ByTime, -1, 0, 0},
		{ByTime, 1e18, end, 15},
		{ByOffset, msgs[7].Offset + 3, msgs[7].Offset, 7},
		{ByID, 50, 0, 0},
	} {
		off, count, err := p.Seek(tc.mode, tc.pos)
		if err != nil || off != tc.off || count != tc.count {
			t.Errorf("Seek(%d, %d) = %d, %d, %v; want %d, %d", tc.mode, tc.pos, off, count, err, tc.off, tc.count)
		}
	}
}
