package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
)

// DefaultSegmentBytes is the size past which the log starts a new segment.
const DefaultSegmentBytes = 100 << 20

// ErrClosed is returned by operations on a closed Log, CommitLog or Partition.
var ErrClosed = errors.New("storage: closed")

// Log is the segment log of one partition: a sequence of records addressed by
// a virtual byte offset that runs on across segment files.
//
// Append, Truncate, Sync and Close belong to one writer (the partition actor)
// and must not be called concurrently with each other. ReadAt, ReadMessages,
// Start and End may be called from any goroutine at any time.
type Log struct {
	dir          string
	segmentBytes int64
	fs           FS

	// mu guards segs and end against concurrent readers. segs is never
	// modified in place: the writer installs a new slice, so a reader's copy
	// stays valid after it drops the lock.
	mu   sync.RWMutex
	segs []*segment
	end  int64

	// Writer-only state.
	unsynced []*segment // rotated out since the last Sync
	dirDirty bool       // a segment file was created since the last Sync
	closed   bool
}

// logRepair is what opening the log had to cut to make the segments
// contiguous again.
type logRepair struct {
	cutBytes        int64
	removedSegments int
}

// OpenLog opens or creates the segment log in dir. Segments are made
// contiguous: data after a missing range is removed and a segment that runs
// into the next one is shortened.
func OpenLog(dir string, segmentBytes int64) (*Log, error) {
	l, _, err := openLog(OSFS{}, dir, segmentBytes)
	return l, err
}

func openLog(fs FS, dir string, segmentBytes int64) (*Log, logRepair, error) {
	var repair logRepair
	if segmentBytes <= 0 {
		return nil, repair, fmt.Errorf("storage: segment size must be positive, got %d", segmentBytes)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, repair, err
	}
	bases, err := listSegments(dir)
	if err != nil {
		return nil, repair, err
	}
	l := &Log{dir: dir, segmentBytes: segmentBytes, fs: fs}
	if len(bases) == 0 {
		s, err := openSegment(fs, dir, 0, os.O_CREATE|os.O_TRUNC)
		if err != nil {
			return nil, repair, err
		}
		l.segs = []*segment{s}
		l.dirDirty = true
		return l, repair, nil
	}
	fail := func(err error) (*Log, logRepair, error) {
		l.closeFiles()
		return nil, repair, err
	}
	var size int64
	for i, base := range bases {
		s, err := openSegment(fs, dir, base, 0)
		if err != nil {
			return fail(err)
		}
		sz, err := s.size()
		if err != nil {
			s.file.Close()
			return fail(err)
		}
		if i > 0 {
			prev := l.segs[len(l.segs)-1]
			span := base - prev.base
			if size < span {
				// A hole: nothing after it can be addressed.
				s.file.Close()
				if err := l.removeFrom(bases[i:], &repair); err != nil {
					return fail(err)
				}
				break
			}
			if size > span {
				// Only zero padding or an interrupted repair makes a segment
				// overlap its successor; the successor's bytes win.
				if err := prev.file.Truncate(span); err != nil {
					s.file.Close()
					return fail(err)
				}
				repair.cutBytes += size - span
			}
		}
		l.segs = append(l.segs, s)
		size = sz
	}
	l.end = l.segs[len(l.segs)-1].base + size
	return l, repair, nil
}

// removeFrom deletes the segment files with the given bases, newest first so
// that a crash half way still leaves a contiguous prefix.
func (l *Log) removeFrom(bases []int64, repair *logRepair) error {
	for i := len(bases) - 1; i >= 0; i-- {
		name := filepath.Join(l.dir, segmentName(bases[i]))
		if fi, err := os.Stat(name); err == nil {
			repair.cutBytes += fi.Size()
		}
		if err := removeFile(l.fs, name); err != nil {
			return err
		}
		repair.removedSegments++
	}
	return nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.file.Close()
	}
}

// segmentBases lists the first offset of each segment, oldest first.
func (l *Log) segmentBases() []int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	bases := make([]int64, len(l.segs))
	for i, s := range l.segs {
		bases[i] = s.base
	}
	return bases
}

// Segments is how many segment files the log has; retention can delete
// only when there are more than one, as the active segment always stays.
func (l *Log) Segments() int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.segs)
}

// Start is the offset of the first byte the log holds.
func (l *Log) Start() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base
}

// End is the offset just past the last appended byte.
func (l *Log) End() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.end
}

// Append writes data (one or more encoded messages) at End() and returns the
// offset it was written at. It is one write to the file with no buffering
// here, so the bytes are in the page cache when Append returns.
func (l *Log) Append(data []byte) (int64, error) {
	if l.closed {
		return 0, ErrClosed
	}
	if len(data) == 0 {
		return 0, errors.New("storage: append of no bytes")
	}
	active := l.segs[len(l.segs)-1]
	offset := l.end
	used := offset - active.base
	if used > 0 && used+int64(len(data)) > l.segmentBytes {
		s, err := l.rotate()
		if err != nil {
			return 0, err
		}
		active, used = s, 0
	}
	if n, err := active.file.WriteAt(data, used); err != nil {
		if n > 0 {
			// Leave no torn record behind a failed write (e.g. disk full).
			active.file.Truncate(used)
		}
		return 0, err
	}
	l.mu.Lock()
	l.end += int64(len(data))
	l.mu.Unlock()
	return offset, nil
}

func (l *Log) rotate() (*segment, error) {
	s, err := openSegment(l.fs, l.dir, l.end, os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, err
	}
	l.unsynced = append(l.unsynced, l.segs[len(l.segs)-1])
	l.dirDirty = true
	segs := append(slices.Clone(l.segs), s)
	l.mu.Lock()
	l.segs = segs
	l.mu.Unlock()
	return s, nil
}

// Truncate cuts the log back to offset, which must lie in [Start(), End()].
// Only uncommitted bytes may be cut: readers must not be reading past offset.
func (l *Log) Truncate(offset int64) error {
	if l.closed {
		return ErrClosed
	}
	start := l.segs[0].base
	if offset < start || offset > l.end {
		return fmt.Errorf("storage: truncate to %d outside log [%d, %d]", offset, start, l.end)
	}
	if offset == l.end {
		return nil
	}
	// keep is the segment that will hold offset as its end.
	keep := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	dropped := l.segs[keep+1:]
	l.mu.Lock()
	l.segs = slices.Clone(l.segs[:keep+1])
	l.end = offset
	l.mu.Unlock()

	l.unsynced = slices.DeleteFunc(l.unsynced, func(s *segment) bool { return s.base > offset })
	for i := len(dropped) - 1; i >= 0; i-- {
		if err := dropped[i].remove(); err != nil {
			return err
		}
		l.dirDirty = true
	}
	kept := l.segs[keep]
	return kept.file.Truncate(offset - kept.base)
}

// ReadAt reads min(len(p), End()-off) bytes at off. It returns io.EOF only
// when off >= End().
func (l *Log) ReadAt(p []byte, off int64) (int, error) {
	l.mu.RLock()
	segs, end := l.segs, l.end
	l.mu.RUnlock()
	if off >= end {
		return 0, io.EOF
	}
	if off < segs[0].base {
		return 0, fmt.Errorf("storage: read at %d before log start %d", off, segs[0].base)
	}
	want := int(min(int64(len(p)), end-off))
	i := sort.Search(len(segs), func(i int) bool { return segs[i].base > off }) - 1
	n := 0
	for n < want {
		s := segs[i]
		limit := end
		if i+1 < len(segs) {
			limit = segs[i+1].base
		}
		chunk := int(min(int64(want-n), limit-off))
		got, err := s.file.ReadAt(p[n:n+chunk], off-s.base)
		n += got
		off += int64(got)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("storage: segment %d ends before offset %d", s.base, off+int64(chunk-got))
			}
			return n, err
		}
		i++
	}
	return n, nil
}

// ReadMessages decodes the whole records in [off, end) that fit in buf. The
// bodies alias buf, or a larger buffer allocated when the first record alone
// does not fit. next is the offset after the last decoded record. On a decode
// error it returns what was decoded before the bad record.
func (l *Log) ReadMessages(off, end int64, buf []byte) (msgs []StoredMessage, next int64, err error) {
	if off >= end {
		return nil, off, nil
	}
	limit := min(end, l.End())
	if off >= limit {
		return nil, off, io.EOF
	}
	n, err := l.ReadAt(buf[:min(int64(len(buf)), limit-off)], off)
	if err != nil {
		return nil, off, err
	}
	msgs, next, err = decodeRecords(buf[:n], off)
	if err != nil || len(msgs) > 0 {
		return msgs, next, err
	}
	return l.readLargeRecord(off, limit)
}

// decodeRecords decodes the whole records in b, which holds the bytes at off.
func decodeRecords(b []byte, off int64) ([]StoredMessage, int64, error) {
	// Counted first, so the slice is made once at its size: grown by
	// append it cost twice the bytes, on the path of every read.
	msgs := make([]StoredMessage, 0, countRecords(b))
	pos := 0
	for len(b)-pos >= sizePrefix {
		if int64(binary.BigEndian.Uint32(b[pos:]))+sizePrefix > int64(len(b)-pos) {
			break
		}
		m, size, err := DecodeMessage(b[pos:])
		if err != nil {
			return msgs, off + int64(pos), fmt.Errorf("at offset %d: %w", off+int64(pos), err)
		}
		msgs = append(msgs, StoredMessage{Offset: off + int64(pos), Size: int32(size), Message: m})
		pos += size
	}
	return msgs, off + int64(pos), nil
}

// countRecords is how many whole records b holds, by their size prefixes
// alone.
func countRecords(b []byte) int {
	n := 0
	for pos := 0; len(b)-pos >= sizePrefix; n++ {
		size := int(binary.BigEndian.Uint32(b[pos:])) + sizePrefix
		if size > len(b)-pos {
			break
		}
		pos += size
	}
	return n
}

func (l *Log) readLargeRecord(off, limit int64) ([]StoredMessage, int64, error) {
	var prefix [sizePrefix]byte
	if limit-off < sizePrefix {
		return nil, off, fmt.Errorf("%w: %d bytes at offset %d before end %d, need a 4-byte size", ErrCorruptMessage, limit-off, off, limit)
	}
	if _, err := l.ReadAt(prefix[:], off); err != nil {
		return nil, off, err
	}
	size := int64(binary.BigEndian.Uint32(prefix[:])) + sizePrefix
	if size < minRecordSize {
		return nil, off, fmt.Errorf("at offset %d: %w: size %d below header size %d", off, ErrCorruptMessage, size-sizePrefix, MessageHeaderSize)
	}
	if off+size > limit {
		return nil, off, fmt.Errorf("%w: record at offset %d of %d bytes crosses end %d", ErrCorruptMessage, off, size, limit)
	}
	big := make([]byte, size)
	if _, err := l.ReadAt(big, off); err != nil {
		return nil, off, err
	}
	return decodeRecords(big, off)
}

// rotatedUnsynced is how many segments were rotated out since the last
// Sync.
func (l *Log) rotatedUnsynced() int { return len(l.unsynced) }

// syncedElsewhere forgets the first n segments rotated out since the last
// Sync: a syncfs that began after they were written has covered them, so
// the next Sync need not fsync them one by one.
func (l *Log) syncedElsewhere(n int) {
	n = min(n, len(l.unsynced))
	l.unsynced = slices.Delete(l.unsynced, 0, n)
}

// Sync flushes every segment written since the last Sync to disk.
func (l *Log) Sync() error {
	if l.closed {
		return ErrClosed
	}
	for _, s := range l.unsynced {
		if err := s.file.Sync(); err != nil {
			return err
		}
	}
	l.unsynced = l.unsynced[:0]
	if err := l.segs[len(l.segs)-1].file.Sync(); err != nil {
		return err
	}
	if l.dirDirty {
		if err := syncDir(l.dir); err != nil {
			return err
		}
		l.dirDirty = false
	}
	return nil
}

// Close closes the segment files without syncing them.
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	l.closed = true
	var first error
	for _, s := range l.segs {
		if err := s.file.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
