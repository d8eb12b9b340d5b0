package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"
)

func TestCommitRecordMarshal(t *testing.T) {
	r := CommitRecord{LogID: 1, Epoch: 2, LastMsgLogID: 3, MsgOffset: 4, MsgSize: 5, MsgCnt: 6, MsgNum: 7}
	b := make([]byte, CommitRecordSize)
	r.Marshal(b)
	want := []byte{
		0, 0, 0, 0, 0, 0, 0, 1,
		0, 0, 0, 0, 0, 0, 0, 2,
		0, 0, 0, 0, 0, 0, 0, 3,
		0, 0, 0, 0, 0, 0, 0, 4,
		0, 0, 0, 5,
		0, 0, 0, 0, 0, 0, 0, 6,
		0, 0, 0, 7,
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("marshal\n%v\nwant\n%v", b, want)
	}
	if got := UnmarshalCommitRecord(b); got != r {
		t.Fatalf("unmarshal %+v, want %+v", got, r)
	}
	if r.End() != 9 || r.LastCount() != 12 {
		t.Fatalf("End %d LastCount %d, want 9 and 12", r.End(), r.LastCount())
	}
}

func TestCommitLogAppendValidation(t *testing.T) {
	first := CommitRecord{LogID: 10, Epoch: 1, LastMsgLogID: 12, MsgOffset: 0, MsgSize: 90, MsgCnt: 1, MsgNum: 3}
	next := CommitRecord{LogID: 13, Epoch: 1, LastMsgLogID: 13, MsgOffset: 90, MsgSize: 30, MsgCnt: 4, MsgNum: 1}
	with := func(f func(r *CommitRecord)) CommitRecord { r := next; f(&r); return r }
	tests := []struct {
		name    string
		r       CommitRecord
		wantErr bool
	}{
		{"follows", next, false},
		{"epoch may change", with(func(r *CommitRecord) { r.Epoch = 5 }), false},
		{"all zero", CommitRecord{}, true},
		{"LogID equal to last", with(func(r *CommitRecord) { r.LogID, r.LastMsgLogID = 10, 10 }), true},
		{"LogID below last", with(func(r *CommitRecord) { r.LogID, r.LastMsgLogID = 9, 9 }), true},
		{"LastMsgLogID below LogID", with(func(r *CommitRecord) { r.LastMsgLogID = 12 }), true},
		{"offset before last end", with(func(r *CommitRecord) { r.MsgOffset = 89 }), true},
		{"offset after last end", with(func(r *CommitRecord) { r.MsgOffset = 91 }), true},
		{"no messages", with(func(r *CommitRecord) { r.MsgNum = 0 }), true},
		{"size too small", with(func(r *CommitRecord) { r.MsgSize = 29 }), true},
		{"count gap", with(func(r *CommitRecord) { r.MsgCnt = 5 }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenCommitLog(filepath.Join(t.TempDir(), "commit.log"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Append(first); err != nil {
				t.Fatal(err)
			}
			err = c.Append(tt.r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Append = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr && !errors.Is(err, ErrInvalidCommit) {
				t.Fatalf("error %v does not wrap ErrInvalidCommit", err)
			}
			wantLast, wantCount := first, int64(1)
			if !tt.wantErr {
				wantLast, wantCount = tt.r, 2
			}
			if last, ok := c.Last(); !ok || last != wantLast || c.Count() != wantCount {
				t.Fatalf("last %+v count %d, want %+v and %d", last, c.Count(), wantLast, wantCount)
			}
		})
	}
}

func TestCommitLogTruncateAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commit.log")
	c, err := OpenCommitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []CommitRecord
	for i := range int64(5) {
		r := CommitRecord{LogID: 1 + 2*i, Epoch: 1, LastMsgLogID: 2 + 2*i, MsgOffset: 60 * i, MsgSize: 60, MsgCnt: 1 + 2*i, MsgNum: 2}
		if err := c.Append(r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	for i, want := range recs {
		if got, err := c.Record(int64(i)); err != nil || got != want {
			t.Fatalf("Record(%d) = %+v, %v; want %+v", i, got, err, want)
		}
	}
	for _, i := range []int64{-1, 5} {
		if _, err := c.Record(i); err == nil {
			t.Fatalf("Record(%d) succeeded", i)
		}
	}
	for _, n := range []int64{-1, 6} {
		if err := c.TruncateTo(n); err == nil {
			t.Fatalf("TruncateTo(%d) succeeded", n)
		}
	}
	if err := c.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if last, ok := c.Last(); !ok || last != recs[2] || c.Count() != 3 {
		t.Fatalf("after truncate last %+v count %d", last, c.Count())
	}
	// The record after the cut can be appended again.
	if err := c.Append(recs[3]); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(recs[4]); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close = %v, want ErrClosed", err)
	}
	c, err = OpenCommitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if last, ok := c.Last(); !ok || last != recs[3] || c.Count() != 4 {
		t.Fatalf("after reopen last %+v count %d", last, c.Count())
	}
	if err := c.TruncateTo(0); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Last(); ok || c.Count() != 0 {
		t.Fatal("commit log not empty after TruncateTo(0)")
	}
}

// AppendAll checks every record of a run against the one before it and
// appends all or none.
func TestCommitLogAppendAll(t *testing.T) {
	first := CommitRecord{LogID: 10, Epoch: 1, LastMsgLogID: 12, MsgOffset: 0, MsgSize: 90, MsgCnt: 1, MsgNum: 3}
	second := CommitRecord{LogID: 13, Epoch: 1, LastMsgLogID: 13, MsgOffset: 90, MsgSize: 30, MsgCnt: 4, MsgNum: 1}
	third := CommitRecord{LogID: 14, Epoch: 2, LastMsgLogID: 15, MsgOffset: 120, MsgSize: 60, MsgCnt: 5, MsgNum: 2}
	path := filepath.Join(t.TempDir(), "commit.log")
	c, err := OpenCommitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AppendAll([]CommitRecord{first}); err != nil {
		t.Fatal(err)
	}
	gap := third
	gap.MsgOffset++
	if err := c.AppendAll([]CommitRecord{second, gap}); !errors.Is(err, ErrInvalidCommit) {
		t.Fatalf("AppendAll with a gap inside the run: err = %v, want ErrInvalidCommit", err)
	}
	if c.Count() != 1 {
		t.Fatalf("%d records after a refused run, want 1", c.Count())
	}
	if err := c.AppendAll([]CommitRecord{second, third}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = OpenCommitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i, want := range []CommitRecord{first, second, third} {
		if got, err := c.Record(int64(i)); err != nil || got != want {
			t.Fatalf("record %d = %+v, %v; want %+v", i, got, err, want)
		}
	}
}

// End and LastLogID are the last record's through appends, a failed
// append, a cut and a reopen, and are read from another goroutine while
// the writer appends (the race detector checks that they may be).
func TestCommitLogEndAndLastLogIDFollowTheLastRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "commit.log")
	c, err := OpenCommitLog(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.End() != 0 || c.LastLogID() != 0 {
		t.Fatalf("empty log: End %d, LastLogID %d", c.End(), c.LastLogID())
	}
	stop := make(chan struct{})
	seen := make(chan int64)
	go func() {
		var highest, highestID int64
		for {
			select {
			case <-stop:
				seen <- highest
				return
			default:
				id, e := c.LastLogID(), c.End()
				if e < highest {
					t.Errorf("End went back from %d to %d while only appends ran", highest, e)
				} else {
					highest = e
				}
				if id < highestID {
					t.Errorf("LastLogID went back from %d to %d while only appends ran", highestID, id)
				} else {
					highestID = id
				}
			}
		}
	}()
	for i := range int64(100) {
		r := CommitRecord{LogID: 1 + i, Epoch: 1, LastMsgLogID: 1 + i, MsgOffset: 50 * i, MsgSize: 50, MsgCnt: 1 + i, MsgNum: 1}
		if err := c.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	if highest := <-seen; highest > 5000 {
		t.Fatalf("reader saw End %d past the last record's 5000", highest)
	}
	if c.End() != 5000 || c.LastLogID() != 100 {
		t.Fatalf("after 100 records of 50 bytes: End %d, LastLogID %d", c.End(), c.LastLogID())
	}
	bad := CommitRecord{LogID: 200, Epoch: 1, LastMsgLogID: 200, MsgOffset: 4000, MsgSize: 50, MsgCnt: 101, MsgNum: 1}
	if err := c.Append(bad); err == nil || c.End() != 5000 || c.LastLogID() != 100 {
		t.Fatalf("a refused append: err %v, End %d, LastLogID %d", err, c.End(), c.LastLogID())
	}
	if err := c.TruncateTo(40); err != nil || c.End() != 2000 || c.LastLogID() != 40 {
		t.Fatalf("cut to 40 records: err %v, End %d, LastLogID %d", err, c.End(), c.LastLogID())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err = OpenCommitLog(path); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.End() != 2000 || c.LastLogID() != 40 {
		t.Fatalf("reopened: End %d, LastLogID %d; want 2000 and 40", c.End(), c.LastLogID())
	}
	if err := c.TruncateTo(0); err != nil || c.End() != 0 || c.LastLogID() != 0 {
		t.Fatalf("cut to nothing: err %v, End %d, LastLogID %d", err, c.End(), c.LastLogID())
	}
}
