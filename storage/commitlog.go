package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// CommitRecordSize is the size of one commit-log record on disk.
const CommitRecordSize = 48

// ErrInvalidCommit is wrapped by the errors of a commit record that does not
// follow the previous one.
var ErrInvalidCommit = errors.New("invalid commit record")

// CommitRecord says that the MsgNum messages in [MsgOffset, MsgOffset+MsgSize)
// of the segment log are committed.
type CommitRecord struct {
	LogID        int64 // ID of the first message
	Epoch        int64
	LastMsgLogID int64 // ID of the last message
	MsgOffset    int64
	MsgSize      int32 // bytes, length prefixes included
	MsgCnt       int64 // 1-based index of the first message in the partition
	MsgNum       int32
}

// Marshal writes r big-endian into b[:48].
func (r CommitRecord) Marshal(b []byte) {
	_ = b[CommitRecordSize-1]
	binary.BigEndian.PutUint64(b[0:], uint64(r.LogID))
	binary.BigEndian.PutUint64(b[8:], uint64(r.Epoch))
	binary.BigEndian.PutUint64(b[16:], uint64(r.LastMsgLogID))
	binary.BigEndian.PutUint64(b[24:], uint64(r.MsgOffset))
	binary.BigEndian.PutUint32(b[32:], uint32(r.MsgSize))
	binary.BigEndian.PutUint64(b[36:], uint64(r.MsgCnt))
	binary.BigEndian.PutUint32(b[44:], uint32(r.MsgNum))
}

// UnmarshalCommitRecord reads a record from b[:48].
func UnmarshalCommitRecord(b []byte) CommitRecord {
	_ = b[CommitRecordSize-1]
	return CommitRecord{
		LogID:        int64(binary.BigEndian.Uint64(b[0:])),
		Epoch:        int64(binary.BigEndian.Uint64(b[8:])),
		LastMsgLogID: int64(binary.BigEndian.Uint64(b[16:])),
		MsgOffset:    int64(binary.BigEndian.Uint64(b[24:])),
		MsgSize:      int32(binary.BigEndian.Uint32(b[32:])),
		MsgCnt:       int64(binary.BigEndian.Uint64(b[36:])),
		MsgNum:       int32(binary.BigEndian.Uint32(b[44:])),
	}
}

// End is the offset just past the record's messages.
func (r CommitRecord) End() int64 { return r.MsgOffset + int64(r.MsgSize) }

// LastCount is the 1-based index of the record's last message, which is the
// partition's message count once the record is committed.
func (r CommitRecord) LastCount() int64 { return r.MsgCnt + int64(r.MsgNum) - 1 }

// checkNext says why r cannot follow prev (nil for the first record), or
// returns nil. Append and recovery share it, so a record accepted at run
// time is never dropped on restart.
func checkNext(prev *CommitRecord, r CommitRecord) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidCommit}, args...)...)
	}
	switch {
	case r == CommitRecord{}:
		return bad("all zero")
	case r.LogID <= 0:
		return bad("LogID %d not positive", r.LogID)
	case r.LastMsgLogID < r.LogID:
		return bad("LastMsgLogID %d < LogID %d", r.LastMsgLogID, r.LogID)
	case r.MsgNum <= 0:
		return bad("MsgNum %d not positive", r.MsgNum)
	case int64(r.MsgSize) < int64(r.MsgNum)*minRecordSize:
		return bad("MsgSize %d too small for %d messages", r.MsgSize, r.MsgNum)
	case r.MsgOffset < 0:
		return bad("MsgOffset %d negative", r.MsgOffset)
	case r.MsgCnt < 1:
		return bad("MsgCnt %d not positive", r.MsgCnt)
	case prev == nil:
		return nil
	case r.LogID <= prev.LogID:
		return bad("LogID %d not above previous %d", r.LogID, prev.LogID)
	case r.MsgOffset != prev.End():
		return bad("MsgOffset %d, previous record ends at %d", r.MsgOffset, prev.End())
	case r.MsgCnt != prev.LastCount()+1:
		return bad("MsgCnt %d, previous record ends at message %d", r.MsgCnt, prev.LastCount())
	}
	return nil
}

// CommitLog is the file of commit records of one partition.
//
// Every method but End belongs to one goroutine at a time, and it holds no
// lock. In a node that is the partition actor, whose turns its mailbox
// serializes: channel actors are handed the segment log alone, and the
// broker, the HTTP API and the tests of a running partition reach the
// commit log through the actor's messages (its Stats carry the committed
// end, count and last record).
type CommitLog struct {
	file   File
	count  int64
	last   CommitRecord
	closed bool
	// end and lastID mirror last.End() and last.LogID for readers on
	// other goroutines.
	end    atomic.Int64
	lastID atomic.Int64
}

// OpenCommitLog opens or creates the commit log at path. A torn record at the
// tail is cut off; the records themselves are not checked (OpenPartition does).
func OpenCommitLog(path string) (*CommitLog, error) {
	c, _, err := openCommitLog(OSFS{}, path)
	return c, err
}

func openCommitLog(fs FS, path string) (c *CommitLog, tornBytes int64, err error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	size := fi.Size()
	tornBytes = size % CommitRecordSize
	if tornBytes != 0 {
		if err := f.Truncate(size - tornBytes); err != nil {
			f.Close()
			return nil, 0, err
		}
	}
	c = &CommitLog{file: f, count: size / CommitRecordSize}
	if c.count > 0 {
		if c.last, err = c.read(c.count - 1); err != nil {
			f.Close()
			return nil, 0, err
		}
		c.end.Store(c.last.End())
		c.lastID.Store(c.last.LogID)
	}
	return c, tornBytes, nil
}

func (c *CommitLog) read(i int64) (CommitRecord, error) {
	var b [CommitRecordSize]byte
	if _, err := c.file.ReadAt(b[:], i*CommitRecordSize); err != nil {
		return CommitRecord{}, fmt.Errorf("storage: read commit record %d: %w", i, err)
	}
	return UnmarshalCommitRecord(b[:]), nil
}

// Append writes r after the last record. It refuses a record that does not
// follow the last one: LogID must grow, MsgOffset must be the last End() and
// MsgCnt must continue the count.
func (c *CommitLog) Append(r CommitRecord) error {
	return c.AppendAll([]CommitRecord{r})
}

// AppendAll writes rs after the last record with one write: a follower
// commits a leader's frame of records at once. Each record must follow the
// one before it as Append requires; if any does not, or the write fails,
// none is appended.
func (c *CommitLog) AppendAll(rs []CommitRecord) error {
	if c.closed {
		return ErrClosed
	}
	var prev *CommitRecord
	if c.count > 0 {
		prev = &c.last
	}
	for i := range rs {
		if err := checkNext(prev, rs[i]); err != nil {
			return err
		}
		prev = &rs[i]
	}
	if len(rs) == 0 {
		return nil
	}
	var one [CommitRecordSize]byte
	b := one[:0]
	if len(rs) > 1 {
		b = make([]byte, 0, len(rs)*CommitRecordSize)
	}
	for _, r := range rs {
		b = b[:len(b)+CommitRecordSize]
		r.Marshal(b[len(b)-CommitRecordSize:])
	}
	at := c.count * CommitRecordSize
	if n, err := c.file.WriteAt(b, at); err != nil {
		if n > 0 {
			c.file.Truncate(at)
		}
		return err
	}
	c.count += int64(len(rs))
	c.last = rs[len(rs)-1]
	c.end.Store(c.last.End())
	c.lastID.Store(c.last.LogID)
	return nil
}

// End is the offset just past the last record's messages, 0 when there is
// none. Unlike every other method it may be called from any goroutine: a
// node samples the committed ends of all its partitions together (its
// publish history), and asking ten thousand partition actors for them at
// once held every publish queued behind those requests.
func (c *CommitLog) End() int64 { return c.end.Load() }

// LastLogID is the last record's LogID, 0 when there is none. Like End it
// may be called from any goroutine: the controller electing the leaders of
// a lost node's partitions asks each candidate node for those of
// thousands of partitions at once, while their actors are busy with the
// failover's own work.
func (c *CommitLog) LastLogID() int64 { return c.lastID.Load() }

// Last returns the last record, false when there is none.
func (c *CommitLog) Last() (CommitRecord, bool) {
	return c.last, c.count > 0
}

// Count is the number of records.
func (c *CommitLog) Count() int64 {
	return c.count
}

// Record returns the record with index i, 0 being the first.
func (c *CommitLog) Record(i int64) (CommitRecord, error) {
	if c.closed {
		return CommitRecord{}, ErrClosed
	}
	if i < 0 || i >= c.count {
		return CommitRecord{}, fmt.Errorf("storage: commit record %d out of range [0, %d)", i, c.count)
	}
	return c.read(i)
}

// TruncateTo keeps the first n records.
func (c *CommitLog) TruncateTo(n int64) error {
	if c.closed {
		return ErrClosed
	}
	if n < 0 || n > c.count {
		return fmt.Errorf("storage: truncate commit log to %d records, have %d", n, c.count)
	}
	if n == c.count {
		return nil
	}
	var last CommitRecord
	if n > 0 {
		var err error
		if last, err = c.read(n - 1); err != nil {
			return err
		}
	}
	if err := c.file.Truncate(n * CommitRecordSize); err != nil {
		return err
	}
	c.count = n
	c.last = last
	c.end.Store(last.End())
	c.lastID.Store(last.LogID)
	return nil
}

// Sync flushes the commit log to disk.
func (c *CommitLog) Sync() error {
	if c.closed {
		return ErrClosed
	}
	return c.file.Sync()
}

// Close closes the file without syncing it.
func (c *CommitLog) Close() error {
	if c.closed {
		return ErrClosed
	}
	c.closed = true
	return c.file.Close()
}
