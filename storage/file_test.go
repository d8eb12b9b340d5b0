package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Raw and ordinary writes leave the same bytes: appends, a write past the
// end (a hole), and an overwrite in the middle.
func TestRawWritesLeaveWhatOrdinaryWritesDo(t *testing.T) {
	dir := t.TempDir()
	var files [2][]byte
	for i, fs := range []OSFS{{}, {ScheduledWrites: true}} {
		name := filepath.Join(dir, []string{"raw", "scheduled"}[i])
		f, err := fs.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, raw := f.(osFile); raw == fs.ScheduledWrites {
			t.Fatalf("OSFS%+v opened a %T", fs, f)
		}
		for _, w := range []struct {
			at   int64
			data string
		}{{0, "first record "}, {13, "second record "}, {4096 + 3, "past the end"}, {6, "OVERWRITE"}, {27, ""}} {
			if n, err := f.WriteAt([]byte(w.data), w.at); err != nil || n != len(w.data) {
				t.Fatalf("WriteAt(%q, %d) = %d, %v", w.data, w.at, n, err)
			}
		}
		f.Close()
		if files[i], err = os.ReadFile(name); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(files[0], files[1]) || len(files[0]) != 4096+3+len("past the end") {
		t.Fatalf("raw writes left %q, ordinary ones %q", files[0], files[1])
	}
}

// A raw write that fails reports the error as an ordinary one does.
func TestRawWriteErrorsAreThoseOfOrdinaryWrites(t *testing.T) {
	name := filepath.Join(t.TempDir(), "read-only")
	if err := os.WriteFile(name, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := OSFS{}.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var pe *os.PathError
	if _, err := f.WriteAt([]byte("y"), 0); !errors.As(err, &pe) || !errors.Is(err, syscall.EBADF) || pe.Path != name {
		t.Fatalf("write to a read-only file: %v", err)
	}
}

// One slow write turns raw writes off for rawPause, then they come back.
func TestASlowWriteTurnsRawWritesOffForAPause(t *testing.T) {
	var g rawGate
	if !g.open(0) {
		t.Fatal("raw writes start off")
	}
	g.took(time.Second, time.Second+slowWrite)
	if !g.open(time.Second + slowWrite) {
		t.Fatal("a write of exactly slowWrite turned raw writes off")
	}
	end := 2*time.Second + slowWrite + time.Microsecond
	g.took(2*time.Second, end)
	if g.open(end) || g.open(end+rawPause-1) {
		t.Fatal("raw writes stayed on after a slow write")
	}
	if !g.open(end + rawPause) {
		t.Fatal("raw writes stayed off past the pause")
	}
}

// One raw write at a time: a second goes the ordinary way, and one that
// finds the raw write in flight past slowWrite turns raw writes off at
// once, without waiting for the held write to return.
func TestOneRawWriteAtATimeAndAHeldOneClosesTheGate(t *testing.T) {
	var g rawGate
	if !g.enter(0) {
		t.Fatal("the first raw write was refused")
	}
	if g.enter(time.Millisecond) || !g.open(time.Millisecond) {
		t.Fatal("a second raw write entered beside the first, or closed the gate too soon")
	}
	held := slowWrite + time.Microsecond
	if g.enter(held) || g.open(held) || g.open(held+rawPause-1) {
		t.Fatal("a raw write held past slowWrite left raw writes on")
	}
	g.leave(0, held)
	if g.enter(held+rawPause-1) || !g.enter(held+rawPause+slowWrite+time.Microsecond) {
		t.Fatal("raw writes did not come back after the pause")
	}
}
