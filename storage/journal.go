package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Journal is the node's write-ahead journal: every write to a partition's
// segment and commit-log files is also appended, as a record naming the
// file, to one sequential file per node. The Syncer then makes writes
// durable with an fdatasync of that one file instead of a syncfs of the
// whole filesystem, and the partition files reach the disk when the kernel
// writes them back or at a checkpoint. Spread over thousands of partitions,
// each small append dirties a page of its own file; a syncfs every
// SyncTimeout writes every such page, tens of times the data, and holds
// appends while it runs (docs/operations.md, "The node's journal").
//
// A file's content is restored from the journal when a crash lost it
// (OpenJournal replays what the last checkpoint did not cover). For that
// the files must be append-only between truncations, and a truncation or
// removal is made durable in the journal before it happens: a replay then
// never writes back bytes that were cut, and restores everything written
// before a cut that the cut kept.
type Journal struct {
	root string // the data directory; records name files relative to it
	dir  string

	mu      sync.Mutex
	buf     []byte // records not yet written to the file
	closed  bool
	records atomic.Int64
	// failed is the first failure to sync or checkpoint the journal. It
	// sticks: a failed write-back may have dropped the pages of a journal
	// or partition file, and the kernel reports that once, so the journal
	// can promise nothing more. Every sync fails from then on (the
	// partitions fsync their own files), and no journal file is removed
	// until a start replays them. A failed write, which writes nothing
	// that counts, is retried by the next sync.
	failed atomic.Pointer[error]

	direct    []*journaledFile // files with direct writes since the last sync began
	syncs     atomic.Uint64    // syncs begun
	flushWake chan struct{}
	stop      chan struct{} // closed by Close

	// wmu orders writes to the file, syncs and rotations.
	wmu   sync.Mutex
	f     *os.File
	seq   uint64
	off   int64
	spare []byte
	dirty bool // records were written to f since the last checkpoint began
}

const (
	journalDir    = "journal"
	journalSuffix = ".wal"
	// journalFlushAt is when the records held in memory between syncs are
	// handed to the flusher goroutine, so that no writer waits for the
	// journal's write; journalHoldMax is when a writer writes them out
	// itself, because the flusher has fallen that far behind.
	journalFlushAt = 1 << 20
	journalHoldMax = 64 << 20

	recWrite    byte = 1
	recTruncate byte = 2
	recRemove   byte = 3

	// recHeader: crc32c of the rest, length of what follows the length,
	// kind, path length, offset or size; then the path and the data.
	recHeader = 4 + 4 + 1 + 2 + 8
)

var errJournalClosed = errors.New("storage: the journal is closed")

// JournalReplay is what OpenJournal found and restored.
type JournalReplay struct {
	Files     int   // journal files read
	Records   int64 // records read
	TornBytes int64 // bytes after the last whole record of a file, ignored
	Restored  int   // partition files whose content a replay wrote
	Bytes     int64 // bytes written back into them
}

// OpenJournal replays the journal files under root that no checkpoint
// covered, then starts a new one. A caller that keeps no journal closes
// it at once: Close makes the replay durable and removes the files.
func OpenJournal(root string) (*Journal, JournalReplay, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, JournalReplay{}, err
	}
	j := &Journal{root: root, dir: filepath.Join(root, journalDir)}
	if err := os.MkdirAll(j.dir, 0o755); err != nil {
		return nil, JournalReplay{}, err
	}
	seqs, err := j.files()
	if err != nil {
		return nil, JournalReplay{}, err
	}
	rep, err := j.replay(seqs)
	if err != nil {
		return nil, rep, err
	}
	next := uint64(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	if err := j.start(next); err != nil {
		return nil, rep, err
	}
	// The files replayed stay until a checkpoint covers what they restored.
	j.dirty = len(seqs) > 0
	j.flushWake, j.stop = make(chan struct{}, 1), make(chan struct{})
	go j.flusher()
	return j, rep, nil
}

func journalName(seq uint64) string { return fmt.Sprintf("%020d%s", seq, journalSuffix) }

// files lists the sequence numbers of the journal files, oldest first.
func (j *Journal) files() ([]uint64, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, err
	}
	var seqs []uint64
	for _, e := range entries {
		var seq uint64
		if name := e.Name(); strings.HasSuffix(name, journalSuffix) {
			if _, err := fmt.Sscanf(strings.TrimSuffix(name, journalSuffix), "%d", &seq); err == nil {
				seqs = append(seqs, seq)
			}
		}
	}
	slices.Sort(seqs)
	return seqs, nil
}

// start opens journal file seq for new records, its name durable in the
// directory before any record relies on it.
func (j *Journal) start(seq uint64) error {
	f, err := os.OpenFile(filepath.Join(j.dir, journalName(seq)), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	j.f, j.seq, j.off = f, seq, 0
	return nil
}

// rel names path relative to the data directory; false for a file outside it.
func (j *Journal) rel(path string) (string, bool) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", false
	}
	r, err := filepath.Rel(j.root, abs)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") || len(r) > 0xffff {
		return "", false
	}
	return r, true
}

// note appends a record; it is durable after the next Sync. A journal
// that failed takes no more records: the writes go on, covered by their
// partitions' own fsyncs.
func (j *Journal) note(kind byte, rel string, off int64, data []byte) {
	if j.Err() != nil {
		return
	}
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return
	}
	j.buf = appendRecord(j.buf, kind, rel, off, data)
	held := len(j.buf)
	j.mu.Unlock()
	j.records.Add(1)
	switch {
	case held >= journalHoldMax:
		// The flusher has fallen this far behind only on a disk that
		// refuses the writes; holding more would grow without bound.
		if err := j.flush(); err != nil {
			j.fail(err)
		}
	case held >= journalFlushAt:
		select {
		case j.flushWake <- struct{}{}:
		default:
		}
	}
}

// flusher writes the records out whenever journalFlushAt of them wait,
// until the journal closes.
func (j *Journal) flusher() {
	for {
		select {
		case <-j.stop:
			return
		case <-j.flushWake:
			_ = j.flush()
		}
	}
}

// noteDurable appends a record and syncs the journal, for the changes a
// replay must know of before they happen; they must not happen when it
// fails.
func (j *Journal) noteDurable(kind byte, rel string, off int64) error {
	j.mu.Lock()
	closed := j.closed
	j.mu.Unlock()
	if closed {
		return errJournalClosed
	}
	j.note(kind, rel, off, nil)
	if err := j.Sync(); err != nil {
		// The record may still reach the file with a later write while
		// the change it announces never happens: nothing the journal
		// holds can be trusted after that.
		return j.fail(err)
	}
	return nil
}

// Err is the journal's failure, nil while it works.
func (j *Journal) Err() error {
	if e := j.failed.Load(); e != nil {
		return *e
	}
	return nil
}

// fail records the journal's first failure and returns it.
func (j *Journal) fail(err error) error {
	j.failed.CompareAndSwap(nil, &err)
	return j.Err()
}

func appendRecord(b []byte, kind byte, rel string, off int64, data []byte) []byte {
	start := len(b)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(1+2+8+len(rel)+len(data)))
	b = append(b, kind)
	b = binary.BigEndian.AppendUint16(b, uint16(len(rel)))
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	b = append(b, rel...)
	b = append(b, data...)
	binary.BigEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], crcTable))
	return b
}

// record is one journal record; data aliases the journal file read.
type record struct {
	kind byte
	path string
	off  int64
	data []byte
}

// decodeJournal reads records from b up to the first that is torn or
// damaged, and returns how many bytes it read.
func decodeJournal(b []byte) ([]record, int) {
	var recs []record
	n := 0
	for len(b)-n >= recHeader {
		size := int(binary.BigEndian.Uint32(b[n+4:]))
		if size < recHeader-8 || size > len(b)-n-8 {
			break
		}
		whole := b[n : n+8+size]
		if crc32.Checksum(whole[4:], crcTable) != binary.BigEndian.Uint32(whole) {
			break
		}
		plen := int(binary.BigEndian.Uint16(whole[9:]))
		if recHeader+plen > len(whole) {
			break
		}
		recs = append(recs, record{
			kind: whole[8],
			off:  int64(binary.BigEndian.Uint64(whole[11:])),
			path: string(whole[recHeader : recHeader+plen]),
			data: whole[recHeader+plen:],
		})
		n += len(whole)
	}
	return recs, n
}

// flush writes the records held in memory to the journal file.
func (j *Journal) flush() error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return j.flushLocked()
}

func (j *Journal) flushLocked() error {
	if err := j.Err(); err != nil {
		return err
	}
	if j.f == nil {
		return errJournalClosed
	}
	j.mu.Lock()
	b := j.buf
	j.buf = j.spare[:0]
	j.mu.Unlock()
	if len(b) == 0 {
		j.spare = b
		return nil
	}
	if _, err := j.f.WriteAt(b, j.off); err != nil {
		// Nothing past j.off counts yet, so the next attempt writes the
		// same records over whatever part of them landed: a full disk
		// that empties again leaves no hole. The records wait, ahead of
		// those noted since.
		j.mu.Lock()
		j.buf = append(b, j.buf...)
		j.mu.Unlock()
		return fmt.Errorf("storage: journal write: %w", err)
	}
	j.off += int64(len(b))
	j.dirty = true
	if cap(b) <= 4*journalFlushAt {
		j.spare = b[:0]
	} else {
		j.spare = nil
	}
	return nil
}

// Sync makes every record noted before it durable.
func (j *Journal) Sync() error {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return j.syncLocked()
}

func (j *Journal) syncLocked() error {
	j.syncs.Add(1)
	j.mu.Lock()
	direct := j.direct
	j.direct = nil
	j.mu.Unlock()
	if err := j.flushLocked(); err != nil {
		j.requeue(direct)
		return err
	}
	if err := fdatasync(j.f); err != nil {
		return j.fail(fmt.Errorf("storage: journal sync: %w", err))
	}
	for _, f := range direct {
		if err := f.syncDirect(); err != nil {
			return j.fail(fmt.Errorf("storage: fsync of %s: %w", f.rel, err))
		}
	}
	// A file that closed meanwhile fsynced itself, and a failure there
	// failed the journal.
	return j.Err()
}

// requeue gives files whose direct writes a failed sync did not cover
// back to the next.
func (j *Journal) requeue(files []*journaledFile) {
	j.mu.Lock()
	j.direct = append(j.direct, files...)
	j.mu.Unlock()
}

// Checkpoint makes every partition file durable with one syncfs and then
// removes the journal files that covered them. New records go to a new
// file meanwhile. Nothing happens when nothing was written since the last.
func (j *Journal) Checkpoint() error {
	_, err := j.checkpoint()
	return err
}

// checkpoint reports whether there was anything to checkpoint.
func (j *Journal) checkpoint() (bool, error) {
	j.wmu.Lock()
	if err := j.Err(); err != nil {
		j.wmu.Unlock()
		return false, err
	}
	if !j.dirty && j.bufLen() == 0 {
		j.wmu.Unlock()
		return false, nil
	}
	// The old file is synced before the new one takes records: a later
	// Sync covers only the new one, and must find every earlier record
	// durable. Every write a record in the old files names completed
	// before the record was noted, so a syncfs that begins after the
	// rotation covers them all.
	if err := j.syncLocked(); err != nil {
		j.wmu.Unlock()
		return true, err
	}
	old, oldSeq := j.f, j.seq
	if err := j.start(oldSeq + 1); err != nil {
		j.wmu.Unlock()
		return true, j.fail(err)
	}
	j.dirty = false
	j.wmu.Unlock()
	old.Close()
	if err := j.syncRoot(); err != nil {
		return true, j.fail(fmt.Errorf("storage: checkpoint: %w", err))
	}
	return true, j.removeUpTo(oldSeq)
}

// syncRoot makes every file on the data directory's filesystem durable.
func (j *Journal) syncRoot() error {
	root, err := os.Open(j.root)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := syncfs(root); err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	return nil
}

func (j *Journal) bufLen() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.buf)
}

// removeUpTo removes the journal files up to seq, which a checkpoint covered.
func (j *Journal) removeUpTo(seq uint64) error {
	seqs, err := j.files()
	if err != nil {
		return err
	}
	for _, s := range seqs {
		if s > seq {
			break
		}
		if err := os.Remove(filepath.Join(j.dir, journalName(s))); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return syncDir(j.dir)
}

// journalCheckpointBytes starts a checkpoint before its time when the
// journal has grown this much, which bounds what a start replays.
const journalCheckpointBytes = 256 << 20

// RunCheckpoints checkpoints every interval, or sooner when the journal
// grew past journalCheckpointBytes, until ctx ends. A failed checkpoint
// fails the journal (Err).
func (j *Journal) RunCheckpoints(ctx context.Context, every time.Duration, onDone func(time.Duration, error)) {
	t := time.NewTicker(min(every, time.Second))
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(last) < every && j.size() < journalCheckpointBytes {
			continue
		}
		start := time.Now()
		did, err := j.checkpoint()
		last = time.Now()
		if did && onDone != nil {
			onDone(time.Since(start), err)
		}
	}
}

func (j *Journal) size() int64 {
	j.wmu.Lock()
	defer j.wmu.Unlock()
	return j.off
}

// Records counts the records noted since the journal opened.
func (j *Journal) Records() int64 { return j.records.Load() }

// Close writes out what the journal holds, makes every partition file
// durable with a syncfs and removes the journal files; the node writes its
// partition files durably on its own from then on. It must not run beside
// a checkpoint. Writes noted after it are not recorded. A journal that
// failed keeps its files, for the next start to replay.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	close(j.stop)
	j.closed = true
	j.mu.Unlock()
	j.wmu.Lock()
	err := j.syncLocked()
	if j.f != nil {
		err = errors.Join(err, j.f.Close())
		j.f = nil
	}
	seq := j.seq
	j.wmu.Unlock()
	if err != nil {
		return err
	}
	if err := j.syncRoot(); err != nil {
		return j.fail(fmt.Errorf("storage: journal close: %w", err))
	}
	return j.removeUpTo(seq)
}

// FS returns fs with its writes, truncations and removals recorded in the
// journal, for the files under the data directory.
func (j *Journal) FS(fs FS) FS { return &journaledFS{fs: fs, j: j} }

type journaledFS struct {
	fs FS
	j  *Journal
}

func (fs *journaledFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	rel, ok := fs.j.rel(name)
	if !ok {
		return fs.fs.OpenFile(name, flag, perm)
	}
	// Emptying a file that exists is a cut; creating one is not, and
	// costs no sync (a partition's first segment, a segment rotated in).
	emptied := false
	if flag&os.O_TRUNC != 0 {
		if _, err := os.Stat(name); err == nil {
			emptied = true
			if err := fs.j.noteDurable(recTruncate, rel, 0); err != nil {
				return nil, err
			}
		}
	}
	f, err := fs.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	// An emptied file is made durable at once: a replay writes what
	// follows over it, and must not find the old bytes behind them.
	if emptied {
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &journaledFile{File: f, j: fs.j, rel: rel}, nil
}

// Remove records name's removal, durably, then removes it.
func (fs *journaledFS) Remove(name string) error {
	if err := fs.j.Forget(name); err != nil {
		return err
	}
	err := removeFile(fs.fs, name)
	if err == nil {
		// Durable before the name is used again: a replay writes the new
		// file's records, and must not find the old file under them.
		err = syncDir(filepath.Dir(name))
	}
	if err != nil {
		fs.j.fail(fmt.Errorf("storage: removing %s after the journal recorded it: %w", name, err))
	}
	return err
}

type journaledFile struct {
	File
	j   *Journal
	rel string

	// What the file's writes since the journal's last sync began: its
	// owner's alone.
	period uint64 // the journal's syncs begun when counted
	bytes  int64

	smu       sync.Mutex
	unsynced  bool // direct writes no fsync has covered yet
	syncing   bool // the journal's sync is fsyncing the file
	dirSynced bool // the directory was synced since the file opened
	closed    bool
}

// journalDirectAfter is how many bytes a file may write between two of the
// journal's syncs before its writes skip the journal. Writing every byte
// twice costs nothing to a partition taking a message now and then, and
// saves its pages' write-back; a busy partition's pages fill whole, and
// writing them twice would halve what the disk takes. Its file is then
// fsynced by the journal's next sync instead.
const journalDirectAfter = 256 << 10

func (f *journaledFile) WriteAt(b []byte, off int64) (int, error) {
	if period := f.j.syncs.Load(); period != f.period {
		f.period, f.bytes = period, 0
	}
	f.bytes += int64(len(b))
	if (f.bytes > journalDirectAfter || f.waitsForSync()) && f.j.Err() == nil {
		return f.writeDirect(b, off)
	}
	n, err := f.File.WriteAt(b, off)
	if n > 0 {
		f.j.note(recWrite, f.rel, off, b[:n])
	}
	return n, err
}

// waitsForSync reports whether direct writes wait for the journal's sync
// to fsync the file, or are being fsynced. Until that is done every write
// is direct: a record after them could reach the disk before they do, and
// a replay would then write it past a hole.
func (f *journaledFile) waitsForSync() bool {
	f.smu.Lock()
	defer f.smu.Unlock()
	return f.unsynced || f.syncing
}

// writeDirect writes b without a record, and has the journal's next sync
// fsync the file (and, the first time, its directory, for a file created
// since the last checkpoint).
func (f *journaledFile) writeDirect(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	if n > 0 {
		f.smu.Lock()
		first := !f.unsynced
		f.unsynced = true
		f.smu.Unlock()
		if first {
			f.j.mu.Lock()
			f.j.direct = append(f.j.direct, f)
			f.j.mu.Unlock()
		}
	}
	return n, err
}

// syncDirect fsyncs the file for the journal's sync, unless its Close
// did. The file's writes go on meanwhile, direct: they are for the next
// sync, which the first of them asks for.
func (f *journaledFile) syncDirect() error {
	f.smu.Lock()
	if !f.unsynced || f.closed {
		f.smu.Unlock()
		return nil
	}
	f.unsynced, f.syncing = false, true
	dirSynced := f.dirSynced
	f.smu.Unlock()
	err := f.File.Sync()
	if err == nil && !dirSynced {
		err = syncDir(filepath.Dir(f.File.Name()))
	}
	f.smu.Lock()
	f.syncing = false
	f.dirSynced = f.dirSynced || err == nil
	f.smu.Unlock()
	return err
}

// Sync fsyncs the file for its partition, which does so when the
// journal's syncs fail: a journal that failed may have failed on this
// file's write-back, which a later fsync, on another descriptor, would
// not report, so it fails too.
func (f *journaledFile) Sync() error {
	if err := f.j.Err(); err != nil {
		return err
	}
	return f.File.Sync()
}

// Close fsyncs direct writes no sync has covered: the journal's next sync
// can no longer reach the file.
func (f *journaledFile) Close() error {
	f.smu.Lock()
	defer f.smu.Unlock()
	var err error
	if f.unsynced && !f.closed {
		if err = f.File.Sync(); err != nil {
			err = f.j.fail(fmt.Errorf("storage: fsync of %s as it closed: %w", f.rel, err))
		}
		f.unsynced = false
	}
	f.closed = true
	return errors.Join(err, f.File.Close())
}

// Truncate records the cut durably, makes it and syncs the file, so that
// a replay neither brings back what was cut nor needs what it kept.
func (f *journaledFile) Truncate(size int64) error {
	if err := f.j.noteDurable(recTruncate, f.rel, size); err != nil {
		return err
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	return f.File.Sync()
}

// Forget records, durably, that path (a file or a directory tree) is
// about to be removed, so that a replay brings none of it back.
func (j *Journal) Forget(path string) error {
	rel, ok := j.rel(path)
	if !ok {
		return nil
	}
	return j.noteDurable(recRemove, rel, 0)
}

// noteWrite records that data was written at the start of the file path,
// which lies under the data directory: durable after the next Sync.
func (j *Journal) noteWrite(path string, data []byte) {
	if rel, ok := j.rel(path); ok {
		j.note(recWrite, rel, 0, data)
	}
}

// forget records, durably and with one sync, that the files paths are
// about to be removed.
func (j *Journal) forget(paths ...string) error {
	j.mu.Lock()
	closed := j.closed
	j.mu.Unlock()
	if closed {
		return errJournalClosed
	}
	for _, path := range paths {
		if rel, ok := j.rel(path); ok {
			j.note(recRemove, rel, 0, nil)
		}
	}
	if err := j.Sync(); err != nil {
		return j.fail(err)
	}
	return nil
}

// Remover is an FS that must hear of removals.
type Remover interface {
	Remove(name string) error
}

// removeFile removes name through fs when it must hear of it.
func removeFile(fs FS, name string) error {
	if r, ok := fs.(Remover); ok {
		return r.Remove(name)
	}
	if err := os.Remove(name); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// journalOf is fs's journal, nil when it has none.
func journalOf(fs FS) *Journal {
	for {
		switch f := fs.(type) {
		case *journaledFS:
			return f.j
		case *IdleFiles:
			fs = f.fs
		default:
			return nil
		}
	}
}

// RemoveAll removes dir and everything under it for good. If fs has a
// journal, it hears of it first, and the removal is durable before
// RemoveAll returns, so the name can be used again.
func RemoveAll(fs FS, dir string) error {
	return removeTree(fs, dir, func() error { return os.RemoveAll(dir) })
}

// Rename moves a partition's directory out of its place as RemoveAll
// removes it: what a journal recorded under from never comes back there.
func Rename(fs FS, from, to string) error {
	return removeTree(fs, from, func() error { return os.Rename(from, to) })
}

func removeTree(fs FS, dir string, remove func() error) error {
	j := journalOf(fs)
	if j != nil {
		if err := j.Forget(dir); err != nil {
			return err
		}
	}
	err := remove()
	if err == nil && j != nil {
		// Only a replay needs the removal durable at once; without a
		// journal it is not worth a directory fsync on the caller's
		// path, which for a discarded replica is the node's role lock.
		err = syncParent(dir)
	}
	if err != nil && j != nil && !os.IsNotExist(err) {
		// The journal says dir is gone while it is not: a replay would
		// drop what it recorded there before.
		j.fail(fmt.Errorf("storage: removing %s after the journal recorded it: %w", dir, err))
	}
	return err
}

func syncParent(path string) error {
	if err := syncDir(filepath.Dir(path)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
