package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
)

// Recovery reports what OpenPartition cut to make the commit log and the
// segment log agree, for a log line.
type Recovery struct {
	TruncatedCommitBytes int64  // torn partial record at the end of the commit log
	DroppedRecords       int    // invalid commit records dropped from the end
	DropReason           string // why the newest dropped record was invalid
	TruncatedLogBytes    int64  // segment bytes cut: uncommitted tail, padding, data after a hole
	RemovedSegments      int    // segment files deleted
}

// Changed is true when recovery cut anything.
func (r Recovery) Changed() bool {
	return r.TruncatedCommitBytes != 0 || r.DroppedRecords != 0 || r.TruncatedLogBytes != 0 || r.RemovedSegments != 0
}

func (r Recovery) String() string {
	s := fmt.Sprintf("cut %d torn commit-log bytes, dropped %d commit records, cut %d log bytes, removed %d segments",
		r.TruncatedCommitBytes, r.DroppedRecords, r.TruncatedLogBytes, r.RemovedSegments)
	if r.DropReason != "" {
		s += " (" + r.DropReason + ")"
	}
	return s
}

// OpenPartition opens or creates the partition in dir. A torn or padded tail
// never stops it: the commit log is cut back to its last valid record and
// the segment log to that record's end. Only I/O errors are returned.
func OpenPartition(dir string, opt Options) (*Partition, Recovery, error) {
	var rec Recovery
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, rec, err
	}
	l, repair, err := openLog(opt.FS, dir, opt.SegmentBytes)
	if err != nil {
		return nil, rec, err
	}
	rec.TruncatedLogBytes = repair.cutBytes
	rec.RemovedSegments = repair.removedSegments
	c, torn, err := openCommitLog(opt.FS, filepath.Join(dir, commitLogName))
	if err != nil {
		l.Close()
		return nil, rec, err
	}
	rec.TruncatedCommitBytes = torn
	p := &Partition{Log: l, Commits: c, dir: dir, opt: opt}
	if err := p.recover(&rec); err != nil {
		l.Close()
		c.Close()
		return nil, rec, err
	}
	return p, rec, nil
}

func (p *Partition) recover(rec *Recovery) error {
	n := p.Commits.Count()
	for ; n > 0; n-- {
		reason, err := p.checkLastRecord(n)
		if err != nil {
			return err
		}
		if reason == nil {
			break
		}
		if rec.DropReason == "" {
			rec.DropReason = fmt.Sprintf("record %d: %v", n-1, reason)
		}
		rec.DroppedRecords++
	}
	kept, reason, err := p.checkSegmentTails(n)
	if err != nil {
		return err
	}
	if kept < n {
		rec.DropReason = fmt.Sprintf("record %d: %v", kept, reason)
		rec.DroppedRecords += int(n - kept)
		n = kept
	}
	if err := p.Commits.TruncateTo(n); err != nil {
		return err
	}
	end := p.Log.Start()
	if last, ok := p.Commits.Last(); ok {
		end = last.End()
	}
	rec.TruncatedLogBytes += p.Log.End() - end
	if err := p.Log.Truncate(end); err != nil {
		return err
	}
	if rec.Changed() {
		// Make the repair durable before new writes land on top of it.
		if err := p.Log.Sync(); err != nil {
			return err
		}
		return p.Commits.Sync()
	}
	return nil
}

// checkLastRecord returns why record n-1 cannot be the last committed one,
// nil if it can, or an I/O error.
func (p *Partition) checkLastRecord(n int64) (reason, err error) {
	r, err := p.Commits.read(n - 1)
	if err != nil {
		return nil, err
	}
	var prev *CommitRecord
	if n > 1 {
		pr, err := p.Commits.read(n - 2)
		if err != nil {
			return nil, err
		}
		prev = &pr
	}
	if reason := checkNext(prev, r); reason != nil {
		return reason, nil
	}
	if r.MsgOffset < p.Log.Start() || r.End() > p.Log.End() {
		return fmt.Errorf("range [%d, %d) beyond log [%d, %d)", r.MsgOffset, r.End(), p.Log.Start(), p.Log.End()), nil
	}
	return p.checkContent(r)
}

// checkContent decodes the record's range: it must hold exactly MsgNum
// messages, the first with ID LogID and the last with ID LastMsgLogID.
func (p *Partition) checkContent(r CommitRecord) (reason, err error) {
	buf := make([]byte, min(int64(r.MsgSize), 64<<10))
	var num int32
	var first, last uint64
	for off := r.MsgOffset; off < r.End(); {
		msgs, next, err := p.Log.ReadMessages(off, r.End(), buf)
		if errors.Is(err, ErrCorruptMessage) {
			return err, nil
		}
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if num == 0 {
				first = m.ID
			}
			last = m.ID
			num++
			if num > r.MsgNum {
				return fmt.Errorf("more than MsgNum %d messages in [%d, %d)", r.MsgNum, r.MsgOffset, r.End()), nil
			}
		}
		off = next
	}
	switch {
	case num != r.MsgNum:
		return fmt.Errorf("%d messages in [%d, %d), MsgNum %d", num, r.MsgOffset, r.End(), r.MsgNum), nil
	case first != uint64(r.LogID) || last != uint64(r.LastMsgLogID):
		return fmt.Errorf("message IDs %d..%d, record says %d..%d", first, last, r.LogID, r.LastMsgLogID), nil
	}
	return nil, nil
}

// checkSegmentTails checks the last committed record of every segment but
// the last. Files reach the disk independently: a crash can leave an older
// segment's tail zero-filled while the segments after it and the commit log
// were written, and the check of the last record alone would not see it. It
// returns how many of the first n records to keep and why the first one cut
// is bad. Records never span segments, so the last record of a segment is
// the one its tail damage reaches first.
func (p *Partition) checkSegmentTails(n int64) (keep int64, reason, err error) {
	bases := p.Log.segmentBases()
	for i := 0; i+1 < len(bases); i++ {
		k, err := p.lastRecordBefore(bases[i+1], n)
		if err != nil {
			return 0, nil, err
		}
		if k < 0 {
			continue
		}
		r, err := p.Commits.read(k)
		if err != nil {
			return 0, nil, err
		}
		if r.MsgOffset < bases[i] {
			continue // nothing committed in this segment
		}
		bad, err := p.checkContent(r)
		if err != nil || bad == nil {
			if err != nil {
				return 0, nil, err
			}
			continue
		}
		// Keep the records of this segment that the damage did not reach.
		for k--; k >= 0; k-- {
			if r, err = p.Commits.read(k); err != nil {
				return 0, nil, err
			}
			if r.End() <= bases[i] {
				break
			}
			ok, err := p.checkContent(r)
			if err != nil {
				return 0, nil, err
			}
			if ok == nil {
				break
			}
		}
		return k + 1, bad, nil
	}
	return n, nil, nil
}

// lastRecordBefore is the index of the last of the first n records that
// starts before offset, or -1.
func (p *Partition) lastRecordBefore(offset, n int64) (int64, error) {
	var readErr error
	i := sort.Search(int(n), func(i int) bool {
		r, err := p.Commits.read(int64(i))
		if err != nil {
			readErr = err
			return true
		}
		return r.MsgOffset >= offset
	})
	return int64(i) - 1, readErr
}
