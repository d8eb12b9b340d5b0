package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func encodeN(firstID uint64, n, bodySize int) []byte {
	var b []byte
	for i := range n {
		body := bytes.Repeat([]byte{byte('a' + i%26)}, bodySize)
		b = AppendMessage(b, &Message{ID: firstID + uint64(i), Timestamp: int64(i), Body: body})
	}
	return b
}

func TestLogAppendReadAcrossRotation(t *testing.T) {
	tests := []struct {
		name         string
		segmentBytes int64
		batches      []int // messages per Append
		bodySize     int
		wantSegments int
	}{
		{"one segment", 1 << 20, []int{1, 2, 3}, 10, 1},
		{"rotate every append", 40, []int{1, 1, 1, 1}, 10, 4},
		{"batches rotate together", 100, []int{2, 2, 2}, 10, 3},
		{"oversized batch fills an empty segment", 50, []int{5, 1}, 10, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := OpenLog(dir, tt.segmentBytes)
			if err != nil {
				t.Fatal(err)
			}
			var all []byte
			id := uint64(1)
			for _, n := range tt.batches {
				data := encodeN(id, n, tt.bodySize)
				id += uint64(n)
				off, err := l.Append(data)
				if err != nil {
					t.Fatal(err)
				}
				if off != int64(len(all)) {
					t.Fatalf("append at %d, want %d", off, len(all))
				}
				all = append(all, data...)
			}
			if l.End() != int64(len(all)) {
				t.Fatalf("end %d, want %d", l.End(), len(all))
			}
			if got := len(segmentPaths(t, dir)); got != tt.wantSegments {
				t.Fatalf("%d segments, want %d", got, tt.wantSegments)
			}
			checkLogContent(t, l, all, id-1)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}

			l, err = OpenLog(dir, tt.segmentBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			checkLogContent(t, l, all, id-1)
			// Records never span segments: each file decodes on its own.
			for _, path := range segmentPaths(t, dir) {
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if _, next, err := decodeRecords(b, 0); err != nil || next != int64(len(b)) {
					t.Fatalf("%s: decoded to %d of %d bytes: %v", path, next, len(b), err)
				}
			}
		})
	}
}

func checkLogContent(t *testing.T, l *Log, want []byte, msgs uint64) {
	t.Helper()
	for _, off := range []int64{0, 1, int64(len(want)) / 2, int64(len(want)) - 1} {
		p := make([]byte, len(want)+10)
		n, err := l.ReadAt(p, off)
		if err != nil || n != len(want)-int(off) || !bytes.Equal(p[:n], want[off:]) {
			t.Fatalf("ReadAt(%d) = %d, %v; want %d bytes matching", off, n, err, len(want)-int(off))
		}
	}
	got := readAll(t, l, 0, l.End())
	if uint64(len(got)) != msgs {
		t.Fatalf("read %d messages, want %d", len(got), msgs)
	}
	for i, m := range got {
		if m.ID != uint64(i)+1 {
			t.Fatalf("message %d has ID %d", i, m.ID)
		}
	}
}

func TestLogReadAtBounds(t *testing.T) {
	l, err := OpenLog(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n, err := l.ReadAt(make([]byte, 4), 0); n != 0 || err != io.EOF {
		t.Fatalf("empty log ReadAt = %d, %v; want io.EOF", n, err)
	}
	if _, err := l.Append(encodeN(1, 1, 4)); err != nil {
		t.Fatal(err)
	}
	if n, err := l.ReadAt(make([]byte, 100), l.End()-3); n != 3 || err != nil {
		t.Fatalf("ReadAt near end = %d, %v; want 3, nil", n, err)
	}
	if n, err := l.ReadAt(make([]byte, 4), l.End()); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at end = %d, %v; want io.EOF", n, err)
	}
	if _, err := l.ReadAt(make([]byte, 4), -1); err == nil || err == io.EOF {
		t.Fatalf("ReadAt before start = %v; want an error", err)
	}
	if _, err := l.Append(nil); err == nil {
		t.Fatal("empty append accepted")
	}
}

func TestReadMessagesLargeRecordAndErrors(t *testing.T) {
	l, err := OpenLog(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	big := encodeN(1, 1, 5000)
	if _, err := l.Append(big); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 3, 100} {
		msgs, next, err := l.ReadMessages(0, l.End(), make([]byte, size))
		if err != nil || len(msgs) != 1 || next != int64(len(big)) || len(msgs[0].Body) != 5000 {
			t.Fatalf("buf %d: %d messages, next %d, err %v", size, len(msgs), next, err)
		}
	}
	if _, _, err := l.ReadMessages(0, 100, make([]byte, 64)); !errors.Is(err, ErrCorruptMessage) {
		t.Fatalf("record crossing end: err = %v, want ErrCorruptMessage", err)
	}
	if _, err := l.Append(make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	msgs, next, err := l.ReadMessages(0, l.End(), make([]byte, 8000))
	if !errors.Is(err, ErrCorruptMessage) || len(msgs) != 1 || next != int64(len(big)) {
		t.Fatalf("zeros after a record: %d messages, next %d, err %v", len(msgs), next, err)
	}
}

func TestLogTruncate(t *testing.T) {
	const recordSize = minRecordSize + 10
	tests := []struct {
		name         string
		to           int64
		wantSegments int
		wantErr      bool
	}{
		{"nothing", 8 * recordSize, 4, false},
		{"inside last segment", 7 * recordSize, 4, false},
		{"segment boundary", 6 * recordSize, 4, false},
		{"inside older segment", 3 * recordSize, 2, false},
		{"to start", 0, 1, false},
		{"past end", 8*recordSize + 1, 4, true},
		{"before start", -1, 4, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := OpenLog(dir, 2*recordSize)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { l.Close() }()
			all := encodeN(1, 8, 10)
			for i := 0; i < len(all); i += recordSize {
				if _, err := l.Append(all[i : i+recordSize]); err != nil {
					t.Fatal(err)
				}
			}
			err = l.Truncate(tt.to)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Truncate(%d) = %v, want error %v", tt.to, err, tt.wantErr)
			}
			wantEnd := tt.to
			if tt.wantErr {
				wantEnd = int64(len(all))
			}
			if l.End() != wantEnd {
				t.Fatalf("end %d, want %d", l.End(), wantEnd)
			}
			if got := len(segmentPaths(t, dir)); got != tt.wantSegments {
				t.Fatalf("%d segment files, want %d", got, tt.wantSegments)
			}
			// Appending after the cut continues the log and survives reopening.
			tail := encodeN(100, 1, 10)
			if _, err := l.Append(tail); err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte(nil), all[:wantEnd]...), tail...)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l, err = OpenLog(dir, 2*recordSize)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(want)+1)
			if n, err := l.ReadAt(got, 0); err != nil || !bytes.Equal(got[:n], want) {
				t.Fatalf("after reopen read %d bytes (%v), want %d matching", n, err, len(want))
			}
		})
	}
}

// TestLogReadAtConcurrentAppend runs a reader of committed bytes against the
// writer, with tiny segments so it crosses many rotations; run it with -race.
func TestLogReadAtConcurrentAppend(t *testing.T) {
	l, err := OpenLog(t.TempDir(), 200)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const total = 2000
	var committed atomic.Int64
	announced := make(chan struct{}, 1)
	result := make(chan error, 1)
	go func() {
		result <- func() error {
			buf := make([]byte, 150)
			var off int64
			want := uint64(1)
			for want <= total {
				end := committed.Load()
				if off == end {
					<-announced
					continue
				}
				msgs, next, err := l.ReadMessages(off, end, buf)
				if err != nil {
					return err
				}
				for _, m := range msgs {
					if m.ID != want || len(m.Body) != int(m.ID%50) {
						return fmt.Errorf("at %d got ID %d body %d, want ID %d", m.Offset, m.ID, len(m.Body), want)
					}
					want++
				}
				off = next
			}
			return nil
		}()
	}()
	for id := uint64(1); id <= total; id++ {
		data := AppendMessage(nil, &Message{ID: id, Body: make([]byte, id%50)})
		if _, err := l.Append(data); err != nil {
			t.Fatal(err)
		}
		committed.Store(l.End())
		select {
		case announced <- struct{}{}:
		default:
		}
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("reader did not finish")
	}
}
