package metrics

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/storage"
)

// A partition directory is walked when first seen; after that its size
// follows its log's growth without a walk, until its log shrinks or its
// turn to be walked again comes; a directory no scrape lists for long is
// forgotten.
func TestDiskUsageFollowsTheLogBetweenWalks(t *testing.T) {
	onDisk := map[string]int64{"a": 1000, "b": 500}
	walks := map[string]int{}
	u := newDiskUsage()
	u.walk = func(dir string) int64 { walks[dir]++; return onDisk[dir] }
	t0 := time.Unix(5000, 0)
	check := func(dir string, end, records int64, at time.Time, want int64, wantWalks int) {
		t.Helper()
		if got := u.bytes(dir, end, records, at); got != want || walks[dir] != wantWalks {
			t.Fatalf("%s at %v: %d bytes after %d walks, want %d after %d", dir, at.Sub(t0), got, walks[dir], want, wantWalks)
		}
	}
	check("a", 800, 4, t0, 1000, 1)
	// 230 bytes of messages in 2 records: no walk.
	check("a", 1030, 6, t0.Add(time.Second), 1000+230+2*storage.CommitRecordSize, 1)
	check("a", 1030, 6, t0.Add(2*time.Second), 1000+230+2*storage.CommitRecordSize, 1)
	// Truncated on a rejoin: walked again.
	onDisk["a"] = 900
	check("a", 700, 3, t0.Add(3*time.Second), 900, 2)
	// Retention deleted a segment, which the log's end does not show:
	// the next walk, at most rewalkEvery later, finds it.
	onDisk["a"] = 100
	check("a", 700, 3, t0.Add(3*time.Second+rewalkEvery-time.Millisecond), 900, 2)
	check("a", 700, 3, t0.Add(3*time.Second+rewalkEvery), 100, 3)
	// An ephemeral partition has no directory.
	if got := u.bytes("", 10, 1, t0); got != 0 {
		t.Fatalf("ephemeral partition: %d bytes", got)
	}
	check("b", 0, 0, t0, 500, 1)
	// A directory left out of a scrape (a partition too busy to answer
	// its stats) is kept; one no scrape listed for forgetAfter is dropped,
	// and walked anew if it comes back.
	// a was last listed at +3s+rewalkEvery, b at 0.
	later := t0.Add(3*time.Second + rewalkEvery + forgetAfter - time.Second)
	u.forget(later)
	if _, ok := u.dirs["a"]; !ok {
		t.Fatal("a directory listed within forgetAfter was dropped")
	}
	if _, ok := u.dirs["b"]; ok {
		t.Fatal("a directory no scrape listed for forgetAfter is still kept")
	}
	check("b", 0, 0, later, 500, 2)
}

// The first walk of each directory falls due somewhere within
// rewalkEvery after it was first seen, so that the walks of thousands of
// partitions seen together spread over the scrapes.
func TestDiskUsageSpreadsTheWalks(t *testing.T) {
	within := map[time.Duration]bool{}
	for i := range 100 {
		o := offset(filepath.Join("data", "t", string(rune('a'+i%26)), string(rune('0'+i/26))))
		if o < 0 || o >= rewalkEvery {
			t.Fatalf("offset %v outside [0, %v)", o, rewalkEvery)
		}
		within[o/(rewalkEvery/10)] = true
	}
	if len(within) < 8 {
		t.Fatalf("100 directories' first rewalks fall in %d of 10 tenths of the interval", len(within))
	}
}

// dirBytes sums every file under a directory, subdirectories included.
func TestDirBytes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ch"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]int{"seg": 300, "commit": 96, filepath.Join("ch", "state"): 20} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := dirBytes(dir); got != 416 {
		t.Fatalf("dirBytes = %d, want 416", got)
	}
}
