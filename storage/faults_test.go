package storage_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/partitamq/partita/internal/faultfs"
	"github.com/partitamq/partita/storage"
)

// batch appends one message and commits it as the partition actor does,
// cutting the log back when the commit fails.
func batch(p *storage.Partition, id int64, body string) (storage.CommitRecord, error) {
	data := storage.AppendMessage(nil, &storage.Message{ID: uint64(id), Timestamp: 1, Body: []byte(body)})
	off, err := p.Log.Append(data)
	if err != nil {
		return storage.CommitRecord{}, err
	}
	_, count := p.Committed()
	r := storage.CommitRecord{LogID: id, Epoch: 1, LastMsgLogID: id, MsgOffset: off, MsgSize: int32(len(data)), MsgCnt: count + 1, MsgNum: 1}
	if err := p.Commit(r); err != nil {
		if terr := p.Log.Truncate(off); terr != nil {
			return r, errors.Join(err, terr)
		}
		return r, err
	}
	return r, nil
}

// committedBodies reopens dir from the real disk and lists what is
// committed there.
func committedBodies(t *testing.T, dir string) []string {
	t.Helper()
	p, rec, err := storage.OpenPartition(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if rec.Changed() {
		t.Errorf("reopening needed repairs: %v", rec)
	}
	var out []string
	for i := range p.Commits.Count() {
		r, err := p.Commits.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		msgs, _, err := p.Log.ReadMessages(r.MsgOffset, r.End(), make([]byte, 4096))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			out = append(out, string(m.Body))
		}
	}
	return out
}

func equal(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// While fsyncs fail no commit succeeds, the commit whose own sync failed is
// taken back, and commits resume once the fault clears; the disk then holds
// exactly the commits that succeeded.
func TestFsyncErrorsRefuseCommitsUntilHealed(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New()
	p, _, err := storage.OpenPartition(dir, storage.Options{SyncEvery: 1, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	id := int64(1)
	write := func(body string) error {
		_, err := batch(p, id, body)
		id++
		if err == nil {
			want = append(want, body)
		}
		return err
	}
	for i := range 3 {
		if err := write(fmt.Sprint("before-", i)); err != nil {
			t.Fatal(err)
		}
	}
	fs.FailSync(nil)
	for i := range 3 {
		err := write(fmt.Sprint("during-", i))
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("commit during fsync failure: err = %v, want EIO", err)
		}
		if p.SyncErr() == nil {
			t.Fatal("partition does not report the fsync failure")
		}
		if p.Commits.Count() != 3 {
			t.Fatalf("%d commit records while fsync fails, want the 3 from before", p.Commits.Count())
		}
	}
	fs.Heal()
	for i := range 3 {
		if err := write(fmt.Sprint("after-", i)); err != nil {
			t.Fatalf("commit after the fault cleared: %v", err)
		}
	}
	if p.SyncErr() != nil {
		t.Fatalf("sync error still reported after healing: %v", p.SyncErr())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := committedBodies(t, dir); !equal(got, want) {
		t.Fatalf("on disk %q, want %q", got, want)
	}
}

// A failing periodic sync (sync-every above 1) also stops commits until a
// sync succeeds.
func TestFailedPeriodicSyncBlocksCommits(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New()
	p, _, err := storage.OpenPartition(dir, storage.Options{SyncEvery: 1000, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := batch(p, 1, "a"); err != nil {
		t.Fatal(err)
	}
	fs.FailSync(nil)
	if err := p.Sync(); err == nil {
		t.Fatal("sync succeeded on a failing disk")
	}
	if _, err := batch(p, 2, "b"); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit after a failed sync: %v, want EIO", err)
	}
	fs.Heal()
	if _, err := batch(p, 2, "b"); err != nil {
		t.Fatalf("commit once syncs work again: %v", err)
	}
}

// A full disk fails the append or the commit with ENOSPC, leaves no torn
// bytes behind, and writes resume once space is freed; everything committed
// before, during and after is intact on disk.
func TestDiskFullRefusesWritesUntilSpaceFreed(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New()
	p, _, err := storage.OpenPartition(dir, storage.Options{SyncEvery: 1, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	id := int64(1)
	if _, err := batch(p, id, "first"); err != nil {
		t.Fatal(err)
	}
	want = append(want, "first")
	id++
	// Room for part of a message (the segment write is cut short), then
	// for a message but not its commit record (the commit record is).
	for _, free := range []int64{20, 60} {
		fs.Fill(free)
		full := 0
		for i := range 3 {
			body := fmt.Sprint("fill-", free, "-", i)
			end, count := p.Committed()
			_, err := batch(p, id, body)
			if err == nil {
				want = append(want, body)
				id++
				continue
			}
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("write on a full disk: %v, want ENOSPC", err)
			}
			full++
			if e, c := p.Committed(); e != end || c != count || p.Log.End() != end {
				t.Fatalf("failed write moved the partition: committed (%d,%d)->(%d,%d), log end %d", end, count, e, c, p.Log.End())
			}
		}
		if full == 0 {
			t.Fatalf("with %d bytes free the disk never filled up", free)
		}
	}
	fs.Heal()
	if _, err := batch(p, id, "after"); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	want = append(want, "after")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := committedBodies(t, dir); !equal(got, want) {
		t.Fatalf("on disk %q, want %q", got, want)
	}
}

// CommitAll commits a run of records with one write to each file, or none
// of them: a disk that fills partway through the commit-log write leaves
// the commit log as it was, and the run can be committed once the disk has
// room again.
func TestCommitAllIsAllOrNothing(t *testing.T) {
	dir := t.TempDir()
	fs := faultfs.New()
	p, _, err := storage.OpenPartition(dir, storage.Options{SyncEvery: 1000, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := batch(p, 1, "first"); err != nil {
		t.Fatal(err)
	}
	var data []byte
	var run []storage.CommitRecord
	end, count := p.Committed()
	for i, body := range []string{"a", "b", "c"} {
		id := int64(2 + i)
		m := storage.AppendMessage(nil, &storage.Message{ID: uint64(id), Timestamp: 1, Body: []byte(body)})
		run = append(run, storage.CommitRecord{LogID: id, Epoch: 1, LastMsgLogID: id, MsgOffset: end + int64(len(data)), MsgSize: int32(len(m)), MsgCnt: count + 1 + int64(i), MsgNum: 1})
		data = append(data, m...)
	}
	if _, err := p.Log.Append(data); err != nil {
		t.Fatal(err)
	}
	// Room for the data already written and one and a half commit records.
	fs.Fill(storage.CommitRecordSize * 3 / 2)
	if err := p.CommitAll(run); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CommitAll on a full disk: err = %v, want ENOSPC", err)
	}
	if got := p.Commits.Count(); got != 1 {
		t.Fatalf("%d commit records after the failed run, want 1", got)
	}
	if last, _ := p.Commits.Last(); last.LogID != 1 {
		t.Fatalf("last record %d after the failed run, want 1", last.LogID)
	}
	fs.Heal()
	if err := p.CommitAll(run); err != nil {
		t.Fatalf("CommitAll once the disk has room: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := committedBodies(t, dir), []string{"first", "a", "b", "c"}; !equal(got, want) {
		t.Fatalf("on disk %q, want %q", got, want)
	}
}
