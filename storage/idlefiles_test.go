package storage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// An idle partition gives its descriptors back after two sweeps and takes
// them again on its next read or write, with nothing lost.
func TestIdlePartitionGivesItsFilesBack(t *testing.T) {
	files := NewIdleFiles(nil)
	dir := t.TempDir()
	p, _ := openTestPartition(t, dir, Options{FS: files, SegmentBytes: 256, SyncEvery: 1000})
	for i := range 20 {
		publish(t, p, "message", string(rune('a'+i)))
	}
	if files.Open() < 3 {
		t.Fatalf("%d files open, want the segments and the commit log", files.Open())
	}
	// Unsynced writes keep their files open.
	files.Sweep()
	files.Sweep()
	if files.Open() == 0 {
		t.Fatal("files with unsynced writes were closed")
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	files.Sweep() // marks them unused
	if n := files.Sweep(); n == 0 || files.Open() != 0 {
		t.Fatalf("second sweep closed %d, %d still open", n, files.Open())
	}
	// Reads and writes reopen what they need.
	checkConsistent(t, p)
	publish(t, p, "after")
	checkConsistent(t, p)
	end, count := p.Committed()
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	files.Sweep()
	files.Sweep()
	if files.Open() != 0 {
		t.Fatalf("%d files open after two sweeps", files.Open())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q, _ := openTestPartition(t, dir, Options{})
	if e, c := q.Committed(); e != end || c != count {
		t.Fatalf("reopened at end %d count %d, want %d %d", e, c, end, count)
	}
	msgs := readAll(t, q.Log, q.Log.Start(), end)
	if got := string(msgs[len(msgs)-1].Body); got != "after" {
		t.Fatalf("last message %q", got)
	}
}

// A file opened with O_TRUNC is not emptied when it is reopened.
func TestReopenKeepsTheContents(t *testing.T) {
	files := NewIdleFiles(nil)
	name := filepath.Join(t.TempDir(), "f")
	f, err := files.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	files.Sweep()
	files.Sweep()
	if files.Open() != 0 {
		t.Fatal("not closed")
	}
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 0); err != nil || !slices.Equal(b, []byte("kept")) {
		t.Fatalf("read %q %v", b, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(b, 0); err == nil {
		t.Fatal("read after Close")
	}
	if files.Open() != 0 {
		t.Fatalf("%d open after Close", files.Open())
	}
}

// Past its budget, opening a file closes others no call is using, so a
// node recovering more partitions than it has descriptors for gets
// through; their contents stay readable.
func TestBudgetClosesUnusedFiles(t *testing.T) {
	files := NewIdleFiles(nil)
	files.Budget = 8
	dir := t.TempDir()
	var open []File
	for i := range 40 {
		f, err := files.OpenFile(filepath.Join(dir, string(rune('a'+i%26))+string(rune('a'+i/26))), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{byte(i)}, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		open = append(open, f)
		if files.Open() > files.Budget+1 {
			t.Fatalf("%d files open after %d opens, budget %d", files.Open(), i+1, files.Budget)
		}
	}
	for i, f := range open {
		var b [1]byte
		if _, err := f.ReadAt(b[:], 0); err != nil || b[0] != byte(i) {
			t.Fatalf("file %d reads %v %v", i, b, err)
		}
	}
	// A file with unsynced writes is never closed to make room.
	if _, err := open[0].WriteAt([]byte{99}, 1); err != nil {
		t.Fatal(err)
	}
	for _, f := range open[1:] {
		var b [1]byte
		f.ReadAt(b[:], 0)
	}
	if open[0].(*idleFile).f == nil {
		t.Fatal("a file with unsynced writes was closed")
	}
}

// countingFS counts the opens of each file name.
type countingFS struct {
	mu    sync.Mutex
	opens map[string]int
}

func (c *countingFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	c.mu.Lock()
	c.opens[name]++
	c.mu.Unlock()
	return OSFS{}.OpenFile(name, flag, perm)
}

// Past its budget the pool closes the files used least recently, a few at
// a time: partitions read all the while keep their descriptors while idle
// ones give theirs up, and a pass does not close a quarter of the node's
// files at once.
func TestBudgetKeepsBusyFilesOpen(t *testing.T) {
	fs := &countingFS{opens: map[string]int{}}
	files := NewIdleFiles(fs)
	files.Budget = 256
	dir := t.TempDir()
	name := func(i int) string { return filepath.Join(dir, fmt.Sprint(i)) }
	open := func(i int) File {
		f, err := files.OpenFile(name(i), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	var busy []File
	for i := range 32 {
		busy = append(busy, open(i))
	}
	for i := 32; i < 32+4*256; i++ {
		if i == 32+256+64 {
			// The first pass finds every file used since it opened: until
			// the hand has come round once, it cannot tell them apart.
			clear(fs.opens)
		}
		if _, err := open(i).Stat(); err != nil {
			t.Fatal(err)
		}
		for _, f := range busy {
			if _, err := f.ReadAt(make([]byte, 1), 0); err != nil && err != io.EOF {
				t.Fatal(err)
			}
		}
		if n := files.Open(); n > files.Budget+1 || i >= 256 && n < files.Budget-2*evictSlack(files.Budget) {
			t.Fatalf("%d files open after opening %d, budget %d", n, i+1, files.Budget)
		}
	}
	for i := range busy {
		if n := fs.opens[name(i)]; n != 0 {
			t.Fatalf("a file read between every two opens was opened again %d times; want it kept open", n)
		}
	}
}

// Writes spread round robin over more files than the budget (a node of
// 10,000 partitions has 20,000 files and 17,952 descriptors) use every
// file once a round. Closing the files least recently used would close
// the very ones the round reaches next, and every use would reopen its
// file. Closing the files reopened last keeps the same files open round
// after round: only about as many uses reopen their file as there are
// files past the budget, a tenth here.
func TestBudgetUnderARoundOverEveryFile(t *testing.T) {
	fs := &countingFS{opens: map[string]int{}}
	files := NewIdleFiles(fs)
	files.Budget = 900
	dir := t.TempDir()
	all := openNumbered(t, files, dir, 1000)
	const rounds = 10
	for r := range rounds + 1 {
		if r == 1 {
			clear(fs.opens) // after a first round that settles the open set
		}
		for _, f := range all {
			if _, err := f.Stat(); err != nil {
				t.Fatal(err)
			}
		}
	}
	reopens := 0
	for _, n := range fs.opens {
		reopens += n
	}
	if uses := rounds * len(all); reopens > uses*3/20 {
		t.Fatalf("%d of %d uses reopened their file; with a tenth of the files over the budget, want at most 15 %%", reopens, uses)
	}
	t.Logf("%d of %d uses reopened their file", reopens, rounds*len(all))
}

// BenchmarkWriteRoundRobinPastTheBudget writes to 20,000 files in turn
// with descriptors for 17,952 of them, as a node of 10,000 partitions
// under writes spread over all of them does, with a Syncer as the node
// runs one:
//
//	go test -run '^$' -bench WriteRoundRobinPastTheBudget ./storage/
func BenchmarkWriteRoundRobinPastTheBudget(b *testing.B) {
	files := NewIdleFiles(nil)
	files.Budget = 17952
	dir := b.TempDir()
	syncer, err := NewSyncer(dir, 50*time.Millisecond, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go syncer.Run(ctx)
	files.Syncer = syncer
	all := openNumbered(b, files, dir, 20000)
	record := make([]byte, 230)
	for i := range 2 * len(all) { // two rounds settle the open set
		all[i%len(all)].WriteAt(record, int64(i/len(all)*len(record)))
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := all[i%len(all)].WriteAt(record, int64((2+i/len(all))*len(record))); err != nil {
			b.Fatal(err)
		}
	}
}

// openNumbered opens files 0 to n-1 in dir through files, closed when
// the test ends.
func openNumbered(tb testing.TB, files *IdleFiles, dir string, n int) []File {
	tb.Helper()
	var all []File
	for i := range n {
		f, err := files.OpenFile(filepath.Join(dir, fmt.Sprint(i)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { f.Close() })
		all = append(all, f)
	}
	return all
}

// The files an eviction would close first are forgotten once their owner
// closes them, once a sweep finds them closed, and never noted without a
// budget: a node whose segments roll and reopen for days holds no list of
// files long gone.
func TestChurnForgetsClosedFiles(t *testing.T) {
	for _, budget := range []int64{0, 1 << 20} {
		files := NewIdleFiles(nil)
		files.Budget = budget
		dir := t.TempDir()
		for round := range 5 {
			batch := make([]File, 100)
			for i := range batch {
				f, err := files.OpenFile(filepath.Join(dir, fmt.Sprint(round, "-", i)), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				batch[i] = f
			}
			files.Sweep() // marks them unused
			files.Sweep() // closes them
			for _, f := range batch {
				if _, err := f.Stat(); err != nil { // reopens
					t.Fatal(err)
				}
			}
			for _, f := range batch[:50] {
				f.Close()
			}
			files.Sweep()
			files.Sweep() // closes the other half again
		}
		files.mu.Lock()
		n := len(files.churn)
		files.mu.Unlock()
		if n != 0 {
			t.Errorf("budget %d: %d files in the churn after every reopened file was closed", budget, n)
		}
	}
}
