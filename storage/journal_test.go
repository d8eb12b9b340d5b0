package storage

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func openTestJournal(t *testing.T, root string) (*Journal, JournalReplay) {
	t.Helper()
	j, rep, err := OpenJournal(root)
	if err != nil {
		t.Fatalf("open journal: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j, rep
}

// openJournaledFS opens a journal in root and the FS that records
// through it.
func openJournaledFS(t *testing.T, root string) (*Journal, FS) {
	t.Helper()
	j, _ := openTestJournal(t, root)
	return j, j.FS(OSFS{})
}

// loseSince cuts path back to size, as a power loss takes what the kernel
// had not written back.
func loseSince(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// A partition whose files lost their last writes in a crash finds every
// commit the journal's sync covered once the journal is replayed: the
// journal, not the files, made them durable.
func TestJournalRestoresCommitsACrashLost(t *testing.T) {
	root := t.TempDir()
	j, _ := openTestJournal(t, root)
	syncer, err := NewJournalSyncer(j, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "topics", "t", "0")
	p, _, err := OpenPartition(dir, Options{FS: j.FS(OSFS{}), Syncer: syncer})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		publish(t, p, "message", string(rune('a'+i)))
	}
	syncer.syncOnce()
	// Nothing of either file reached the disk.
	for _, path := range append(segmentPaths(t, dir), filepath.Join(dir, commitLogName)) {
		loseSince(t, path, 0)
	}
	j2, rep := openTestJournal(t, root)
	defer j2.Close()
	if rep.Restored != 2 || rep.Bytes == 0 {
		t.Fatalf("replay %+v: want both files restored", rep)
	}
	back, _, err := OpenPartition(dir, Options{FS: j2.FS(OSFS{})})
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	if _, count := back.Committed(); count != 40 {
		t.Fatalf("%d messages committed after the replay, want 40", count)
	}
	checkConsistent(t, back)
}

// After a process crash the files hold every write: the replay compares
// and writes nothing.
func TestJournalReplayAfterAProcessCrashWritesNothing(t *testing.T) {
	root := t.TempDir()
	j, _ := openTestJournal(t, root)
	dir := filepath.Join(root, "p")
	p, _, err := OpenPartition(dir, Options{FS: j.FS(OSFS{})})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, p, "a", "b", "c")
	mustSync(t, j)
	_, rep := openTestJournal(t, root)
	if rep.Records == 0 || rep.Restored != 0 || rep.Bytes != 0 {
		t.Fatalf("replay %+v: want records read and nothing written", rep)
	}
}

// A cut is durable in the journal before it is made, and a replay never
// writes back what it cut; what it kept, and what came after it, a replay
// restores.
func TestJournalReplayKeepsCutsCut(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	path := filepath.Join(root, "f")
	f := createFile(t, fs, path)
	a := bytes.Repeat([]byte("a"), 100)
	b := bytes.Repeat([]byte("b"), 30)
	mustWrite(t, f, a, 0)
	if err := f.Truncate(50); err != nil {
		t.Fatal(err)
	}
	// The cut is in the journal before any later write is.
	_, rep := openTestJournal(t, root)
	if got := readFile(t, path); !bytes.Equal(got, a[:50]) {
		t.Fatalf("after a replay of write and cut: %q", got)
	}
	if rep.Bytes != 0 {
		t.Fatalf("replay %+v wrote into a file that held what it kept", rep)
	}
	mustWrite(t, f, b, 50)
	mustSync(t, j)
	want := append(bytes.Clone(a[:50]), b...)
	for _, lost := range []int64{0, 20, 50, 60} {
		loseSince(t, path, lost)
		if _, rep := openTestJournal(t, root); rep.Bytes == 0 {
			t.Fatalf("lost from %d: the replay wrote nothing", lost)
		}
		if got := readFile(t, path); !bytes.Equal(got, want) {
			t.Fatalf("lost from %d, replayed: %q, want %q", lost, got, want)
		}
	}
}

// A file removed, or a directory, stays removed whatever the journal
// wrote into it before; what is written after under the same name comes
// back.
func TestJournalReplayKeepsRemovalsRemoved(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	dir := filepath.Join(root, "topics", "t")
	old := filepath.Join(dir, "0", "old")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	f := createFile(t, fs, old)
	mustWrite(t, f, []byte("old"), 0)
	f.Close()
	single := filepath.Join(dir, "single")
	g := createFile(t, fs, single)
	mustWrite(t, g, []byte("single"), 0)
	g.Close()
	if err := removeFile(fs, single); err != nil {
		t.Fatal(err)
	}
	if err := RemoveAll(fs, filepath.Join(dir, "0")); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "0", "new")
	if err := os.MkdirAll(filepath.Dir(again), 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := fs.OpenFile(again, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, h, []byte("new"), 0)
	h.Close()
	mustSync(t, j)
	// The power loss takes the new file's content; the journal has it.
	loseSince(t, again, 0)
	if _, rep := openTestJournal(t, root); rep.Restored != 1 {
		t.Fatalf("replay %+v: want the new file restored alone", rep)
	}
	for _, gone := range []string{old, single} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("%s came back: %v", gone, err)
		}
	}
	if got := readFile(t, again); string(got) != "new" {
		t.Fatalf("the new file holds %q", got)
	}
}

// A torn record at a journal file's end is where its replay stops; the
// records before it are replayed.
func TestJournalReplayStopsAtATornRecord(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	path := filepath.Join(root, "f")
	f := createFile(t, fs, path)
	mustWrite(t, f, []byte("first"), 0)
	mustWrite(t, f, []byte("second"), 5)
	mustSync(t, j)
	jf := filepath.Join(root, journalDir, journalName(j.seq))
	st, err := os.Stat(jf)
	if err != nil {
		t.Fatal(err)
	}
	// The second record is torn: its last byte never reached the disk.
	loseSince(t, jf, st.Size()-1)
	loseSince(t, path, 0)
	_, rep := openTestJournal(t, root)
	if rep.Records != 1 || rep.TornBytes == 0 {
		t.Fatalf("replay %+v: want one record and a torn tail", rep)
	}
	if got := readFile(t, path); string(got) != "first" {
		t.Fatalf("replayed file %q", got)
	}
}

// A checkpoint makes the partition files durable and removes the journal
// files it covered: a replay after it has nothing to read.
func TestJournalCheckpointRemovesWhatItCovered(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	f := createFile(t, fs, filepath.Join(root, "f"))
	mustWrite(t, f, []byte("covered"), 0)
	if err := j.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, []byte("after"), 7)
	mustSync(t, j)
	seqs, err := j.files()
	if err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 1 || seqs[0] != j.seq {
		t.Fatalf("journal files %v after a checkpoint, want only %d", seqs, j.seq)
	}
	_, rep := openTestJournal(t, root)
	if rep.Records != 1 {
		t.Fatalf("replay %+v: want the one record written after the checkpoint", rep)
	}
}

// Close leaves no journal behind; the files take writes after it, made
// durable by their partitions' own fsyncs, and nothing records them.
func TestJournalClose(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	f := createFile(t, fs, filepath.Join(root, "f"))
	mustWrite(t, f, []byte("x"), 0)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if seqs, err := j.files(); err != nil || len(seqs) != 0 {
		t.Fatalf("journal files %v (%v) after Close", seqs, err)
	}
	mustWrite(t, f, []byte("y"), 1)
	if seqs, err := j.files(); err != nil || len(seqs) != 0 || j.Records() != 1 {
		t.Fatalf("journal files %v (%v), %d records after a write after Close", seqs, err, j.Records())
	}
}

func mustWrite(t *testing.T, f File, b []byte, off int64) {
	t.Helper()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func mustSync(t *testing.T, j *Journal) {
	t.Helper()
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func createFile(t *testing.T, fs FS, path string) File {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A journal that fails to sync fails for good: every later sync fails too
// (the partitions then fsync their own files), the partition files still
// take writes, and no journal file is removed, for the next start to
// replay.
func TestJournalFailureSticks(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	f := createFile(t, fs, filepath.Join(root, "f"))
	mustWrite(t, f, []byte("before"), 0)
	mustSync(t, j)
	good := j.f
	// Writes land, syncs fail: a character device takes no fsync.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	j.f = null
	mustWrite(t, f, []byte("during"), 6)
	if err := j.Sync(); err == nil {
		t.Fatal("a journal sync that failed reported success")
	}
	j.f = good
	if err := j.Sync(); err == nil || j.Err() == nil {
		t.Fatalf("the failure did not stick: sync %v, Err %v", err, j.Err())
	}
	if err := j.Checkpoint(); err == nil {
		t.Fatal("a failed journal checkpointed")
	}
	if err := f.Truncate(3); err == nil {
		t.Fatal("a cut went ahead with a journal that cannot record it")
	}
	// The partition's own fsync could miss a write-back error the
	// journal's sync saw, so it fails too.
	if err := f.Sync(); err == nil {
		t.Fatal("a partition file's fsync succeeded after the journal failed")
	}
	mustWrite(t, f, []byte("after"), 12)
	if seqs, err := j.files(); err != nil || len(seqs) != 1 {
		t.Fatalf("journal files %v (%v) after the failure, want the one kept", seqs, err)
	}
	if got := readFile(t, filepath.Join(root, "f")); string(got) != "beforeduringafter" {
		t.Fatalf("the file holds %q", got)
	}
}

// A write of the journal that fails is retried by the next sync, its
// records kept: a disk that was full and has room again leaves no hole.
func TestJournalRetriesAFailedWrite(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	path := filepath.Join(root, "f")
	f := createFile(t, fs, path)
	mustWrite(t, f, []byte("first"), 0)
	mustSync(t, j)
	good := j.f
	readOnly, err := os.Open(good.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	j.f = readOnly // every write fails
	mustWrite(t, f, []byte("second"), 5)
	if err := j.Sync(); err == nil {
		t.Fatal("a journal write that failed reported success")
	}
	j.f = good
	if err := j.Sync(); err != nil || j.Err() != nil {
		t.Fatalf("the sync after a failed write: %v, Err %v", err, j.Err())
	}
	loseSince(t, path, 0)
	if _, rep := openTestJournal(t, root); rep.Records != 2 {
		t.Fatalf("replay %+v: want both writes", rep)
	}
	if got := readFile(t, path); string(got) != "firstsecond" {
		t.Fatalf("replayed file %q", got)
	}
}

// A file that writes more than journalDirectAfter between two of the
// journal's syncs writes the rest without records, and the next sync
// fsyncs it: busy partitions do not write every byte twice. After that
// sync its writes are recorded again.
func TestJournalBusyFileSkipsTheJournal(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	f := createFile(t, fs, filepath.Join(root, "busy"))
	chunk := bytes.Repeat([]byte("b"), 8<<10)
	off := int64(0)
	write := func(n int) {
		for range n {
			mustWrite(t, f, chunk, off)
			off += int64(len(chunk))
		}
	}
	write(64)
	recorded := j.Records()
	if want := int64(journalDirectAfter / len(chunk)); recorded != want {
		t.Fatalf("%d of 64 writes recorded, want the first %d", recorded, want)
	}
	jf := f.(*journaledFile)
	if !jf.unsynced || len(j.direct) != 1 {
		t.Fatalf("the busy file is not waiting for the journal's sync: unsynced %v, %d direct", jf.unsynced, len(j.direct))
	}
	mustSync(t, j)
	if jf.unsynced || len(j.direct) != 0 {
		t.Fatal("the journal's sync left the busy file unsynced")
	}
	write(1)
	if j.Records() != recorded+1 {
		t.Fatal("a write after the sync was not recorded")
	}
	// A sync that began but has not fsynced the file yet: the file's
	// writes stay direct, so no record lands beyond bytes the disk may
	// not have.
	write(64)
	recorded = j.Records()
	j.syncs.Add(1)
	write(1)
	if j.Records() != recorded {
		t.Fatal("a write was recorded while direct writes before it waited for their fsync")
	}
	mustSync(t, j)
	// Closed with direct writes unsynced, the file fsyncs itself.
	write(64)
	if err := f.Close(); err != nil || jf.unsynced {
		t.Fatalf("close: %v, unsynced %v", err, jf.unsynced)
	}
	if err := j.Sync(); err != nil {
		t.Fatalf("the journal's sync after the file closed: %v", err)
	}
}

// What the journal adds to a partition's append and commit, one message
// at a time and in batches of 200 (`go test -run '^$' -bench
// PartitionWrite ./storage/`), with the node's sync every 1,000 commits,
// as past --sync-every.
func BenchmarkPartitionWrite(b *testing.B) {
	for _, batch := range []int{1, 200} {
		for _, journal := range []bool{false, true} {
			b.Run(fmt.Sprintf("batch=%d/journal=%v", batch, journal), func(b *testing.B) {
				root := b.TempDir()
				opt := Options{}
				if journal {
					j, _, err := OpenJournal(root)
					if err != nil {
						b.Fatal(err)
					}
					defer j.Close()
					opt.FS = j.FS(OSFS{})
					opt.Syncer, _ = NewJournalSyncer(j, time.Hour, nil)
				} else {
					s, err := NewSyncer(root, time.Hour, nil)
					if err != nil {
						b.Fatal(err)
					}
					opt.Syncer = s
				}
				p, _ := openTestPartition(b, filepath.Join(root, "p"), opt)
				// The same bytes every time: what is measured is the
				// storage's, not the encoding's.
				var data []byte
				for i := range batch {
					data = AppendMessage(data, &Message{ID: uint64(i + 1), Body: bytes.Repeat([]byte("m"), 200)})
				}
				b.SetBytes(int64(len(data)))
				b.ResetTimer()
				for i := range int64(b.N) {
					off, err := p.Log.Append(data)
					if err != nil {
						b.Fatal(err)
					}
					first := i*int64(batch) + 1
					r := CommitRecord{LogID: first, Epoch: 1, LastMsgLogID: first + int64(batch) - 1,
						MsgOffset: off, MsgSize: int32(len(data)), MsgCnt: first, MsgNum: int32(batch)}
					if err := p.Commit(r); err != nil {
						b.Fatal(err)
					}
					if i%1000 == 999 {
						opt.Syncer.syncOnce()
					}
				}
			})
		}
	}
}

// JournalFloors is what each file held when the oldest journal file began,
// as far as the journal can tell: the lowest offset it wrote, for the files
// it never cut or removed.
func TestJournalFloors(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	open := func(name string) File {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		return createFile(t, fs, path)
	}
	a, b, c, d := open("a"), open("b"), open("c"), open(filepath.Join("d", "x"))
	mustWrite(t, b, make([]byte, 500), 0)
	if err := j.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, a, []byte("first"), 0)
	mustWrite(t, a, []byte("second"), 5)
	mustWrite(t, b, []byte("tail"), 500)
	mustWrite(t, c, []byte("cut"), 0)
	if err := c.Truncate(1); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, d, []byte("gone"), 0)
	if err := RemoveAll(fs, filepath.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	mustSync(t, j)
	floors, err := JournalFloors(root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{filepath.Join(root, "a"): 0, filepath.Join(root, "b"): 500}
	if len(floors) != len(want) {
		t.Fatalf("floors %v, want %v", floors, want)
	}
	for path, floor := range want {
		if got, ok := floors[path]; !ok || got != floor {
			t.Fatalf("floors %v, want %v", floors, want)
		}
	}
}

// A busy file's writes without records leave a gap in its records; the
// fsync that made them durable came before the first record after them,
// so a power loss keeps everything before that record. Cutting the file
// to its lowest record would take those bytes, and a replay, restoring
// only what was recorded, would leave zeros in their place.
func TestJournalFloorsKeepWhatADirectWriteSynced(t *testing.T) {
	root := t.TempDir()
	j, fs := openJournaledFS(t, root)
	path := filepath.Join(root, "busy")
	f := createFile(t, fs, path)
	mustWrite(t, f, []byte("recorded"), 0)
	mustSync(t, j)
	chunk := bytes.Repeat([]byte("b"), 8<<10)
	off := int64(len("recorded"))
	for range journalDirectAfter/len(chunk) + 4 {
		mustWrite(t, f, chunk, off)
		off += int64(len(chunk))
	}
	mustSync(t, j)
	mustWrite(t, f, []byte("after"), off)
	mustSync(t, j)
	floors, err := JournalFloors(root)
	if err != nil {
		t.Fatal(err)
	}
	// The records of the first journal's sync period run contiguously
	// from 0; the direct writes after them leave a gap that ends at off.
	if got := floors[path]; got != off {
		t.Fatalf("floor %d, want %d, where the first record after the direct writes begins", got, off)
	}
	// What a power loss keeps, with the replay after it, is the file as
	// written: no zeros where the direct writes were. The journal is not
	// closed first, as a node that loses its power closes nothing (a
	// close would checkpoint).
	want := readFile(t, path)
	loseSince(t, path, floors[path])
	openTestJournal(t, root)
	if got := readFile(t, path); !bytes.Equal(got, want) {
		t.Fatalf("after the cut and a replay the file differs from what was written (%d bytes against %d)", len(got), len(want))
	}
}

// syncGate's files hold the first fsync until the test lets it go.
type syncGate struct {
	entered, release chan struct{}
	once             sync.Once
}

func (g *syncGate) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &gatedFile{File: f, g: g}, nil
}

type gatedFile struct {
	File
	g *syncGate
}

func (f *gatedFile) Sync() error {
	f.g.once.Do(func() {
		f.g.entered <- struct{}{}
		<-f.g.release
	})
	return f.File.Sync()
}

// A busy file's writes do not wait for the journal's fsync of it: they go
// on, direct, and the next sync covers them.
func TestJournalBusyFileWritesDuringItsFsync(t *testing.T) {
	root := t.TempDir()
	j, _ := openTestJournal(t, root)
	gate := &syncGate{entered: make(chan struct{}), release: make(chan struct{})}
	f := createFile(t, j.FS(gate), filepath.Join(root, "busy"))
	chunk := bytes.Repeat([]byte("b"), 8<<10)
	off := int64(0)
	for range 64 {
		mustWrite(t, f, chunk, off)
		off += int64(len(chunk))
	}
	synced := make(chan error, 1)
	go func() { synced <- j.Sync() }()
	<-gate.entered // the journal's sync is fsyncing the file
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
	}()
	recorded := j.Records()
	wrote := make(chan error)
	go func() {
		_, err := f.WriteAt(chunk, off)
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write waited for the journal's fsync of its file")
	}
	if j.Records() != recorded {
		t.Fatal("a write was recorded while the file's direct writes were being fsynced")
	}
	close(gate.release)
	released = true
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	jf := f.(*journaledFile)
	if !jf.unsynced {
		t.Fatal("the write made during the fsync is not left for the next sync")
	}
	if err := j.Sync(); err != nil || jf.unsynced {
		t.Fatalf("the next sync: %v, unsynced %v", err, jf.unsynced)
	}
}
