package storage

import (
	"bytes"
	"fmt"

	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// damageSegBytes keeps segments small so that damage lands in older
// segments as often as in the active one.
const damageSegBytes = 700

// original is what was committed before the damage: the records and each
// record's messages.
type original struct {
	recs []CommitRecord
	msgs [][]StoredMessage
}

// setupDamage commits 60 records of 1 to 4 messages of random sizes.
func setupDamage(t *testing.T, rng *rand.Rand) (string, original) {
	t.Helper()
	dir := t.TempDir()
	p, _, err := OpenPartition(dir, Options{SegmentBytes: damageSegBytes})
	if err != nil {
		t.Fatal(err)
	}
	var o original
	for range 60 {
		bodies := make([]string, 1+rng.IntN(4))
		for i := range bodies {
			bodies[i] = string(bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, 1+rng.IntN(60)))
		}
		r := publish(t, p, bodies...)
		o.recs = append(o.recs, r)
		o.msgs = append(o.msgs, readAll(t, p.Log, r.MsgOffset, r.End()))
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, o
}

func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// damage is one fault at a random offset of one file: a torn write (the
// file ends there), a zero-filled tail (zeros from there to the end, the
// size kept, as a crash leaves blocks allocated but never written), or
// zeros from there past the old end.
type damage struct {
	file string // base name
	kind string
	at   int64
}

func (d damage) apply(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, d.file)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	switch d.kind {
	case "torn":
		err = f.Truncate(d.at)
	case "zero tail":
		_, err = f.WriteAt(make([]byte, fi.Size()-d.at), d.at)
	case "zero past end":
		_, err = f.WriteAt(make([]byte, fi.Size()-d.at+int64(1+d.at%300)), d.at)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// intact is how many records lie wholly before the damage: recovery must
// keep at least these.
func (d damage) intact(o original) int {
	n := 0
	for i, r := range o.recs {
		var before bool
		if d.file == commitLogName {
			before = int64(i+1)*CommitRecordSize <= d.at
		} else {
			base, _ := parseSegmentName(d.file)
			before = r.End() <= base+d.at
		}
		if !before {
			break
		}
		n++
	}
	return n
}

// zeroedLastBody is the one damage recovery cannot see: zeros from inside
// the body of a record's last message to the end of the segment leave every
// header intact, and the 48-byte commit record (youzan/nsq's) carries no
// checksum to tell those zeros from a body that ends in zeros.
func (d damage) zeroedLastBody(msgs []StoredMessage, j int, got StoredMessage) bool {
	if d.file == commitLogName || d.kind == "torn" || j != len(msgs)-1 {
		return false
	}
	base, _ := parseSegmentName(d.file)
	m := msgs[j]
	bodyStart := m.Offset + int64(m.Size) - int64(len(m.Body))
	v := base + d.at
	if v < bodyStart || v >= m.Offset+int64(m.Size) {
		return false
	}
	cut := int(v - bodyStart)
	return got.ID == m.ID && bytes.Equal(got.Body[:cut], m.Body[:cut]) && !bytes.ContainsFunc(got.Body[cut:], func(r rune) bool { return r != 0 })
}

// Torn writes and zero-filled tails at random offsets of the commit log and
// of every segment, older ones included: recovery keeps a prefix of the
// committed records with their messages exactly as written, loses none
// that lay wholly before the damage, and leaves a partition that takes
// writes and reopens without further repair.
func TestRecoveryFromRandomDamage(t *testing.T) {
	seed := uint64(20261122)
	rng := rand.New(rand.NewPCG(seed, 7))
	pristine, o := setupDamage(t, rng)
	files := []string{commitLogName}
	for _, p := range segmentPaths(t, pristine) {
		files = append(files, filepath.Base(p))
	}
	if len(files) < 5 {
		t.Fatalf("only %d files; the test wants several segments", len(files))
	}
	var undetectable atomic.Int64
	defer func() {
		t.Logf("%d of 300 trials zeroed only the end of a last message body, which no check can see", undetectable.Load())
	}()
	for trial := range 300 {
		file := files[rng.IntN(len(files))]
		fi, err := os.Stat(filepath.Join(pristine, file))
		if err != nil {
			t.Fatal(err)
		}
		d := damage{file: file, kind: []string{"torn", "zero tail", "zero past end"}[rng.IntN(3)], at: rng.Int64N(fi.Size() + 1)}
		t.Run(fmt.Sprintf("%d %s %s at %d", trial, d.file, d.kind, d.at), func(t *testing.T) {
			dir := copyDir(t, pristine)
			d.apply(t, dir)
			p, rec := openTestPartition(t, dir, Options{SegmentBytes: damageSegBytes})
			kept := int(p.Commits.Count())
			if kept < d.intact(o) || kept > len(o.recs) {
				t.Fatalf("kept %d records, %d lay before the damage (%v)", kept, d.intact(o), rec)
			}
			for i := range kept {
				r, err := p.Commits.Record(int64(i))
				if err != nil {
					t.Fatal(err)
				}
				if r != o.recs[i] {
					t.Fatalf("record %d is %+v, was %+v", i, r, o.recs[i])
				}
				got := readAll(t, p.Log, r.MsgOffset, r.End())
				if len(got) != len(o.msgs[i]) {
					t.Fatalf("record %d holds %d messages, had %d", i, len(got), len(o.msgs[i]))
				}
				for j := range got {
					if got[j].ID == o.msgs[i][j].ID && bytes.Equal(got[j].Body, o.msgs[i][j].Body) {
						continue
					}
					if !d.zeroedLastBody(o.msgs[i], j, got[j]) {
						t.Fatalf("record %d message %d changed: was %+v, now %+v", i, j, o.msgs[i][j], got[j])
					}
					undetectable.Add(1)
				}
			}
			checkConsistent(t, p)
			r := publish(t, p, "after damage")
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			p, rec = openTestPartition(t, dir, Options{SegmentBytes: damageSegBytes})
			if rec.Changed() {
				t.Fatalf("second open repaired again: %v", rec)
			}
			if end, _ := p.Committed(); end != r.End() {
				t.Fatalf("committed end %d after reopen, want %d", end, r.End())
			}
		})
	}
}
