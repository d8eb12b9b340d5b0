package topic

import (
	"fmt"

	"github.com/partitamq/partita/storage"
)

// Follower is the pure core of a follower's apply path (the seeds'
// putMessageOnSlave / putMessagesOnSlave): it checks a leader's write
// against this replica's state and says whether to append it, acknowledge
// it as a duplicate, or refuse it. The shell appends and commits; the
// follower commits at once, before the leader does.
type Follower struct {
	epoch    int64 // EpochForWrite this replica accepts
	inISR    bool
	writable bool
	pos      Position
	lastLog  int64 // LogID of the last committed record; 0 when empty
	lookup   func(logID int64) (storage.CommitRecord, bool)
}

// ReplicaWriteIn is a leader's write as the follower receives it.
type ReplicaWriteIn struct {
	EpochForWrite int64
	Record        storage.CommitRecord
	Data          []byte
}

// ApplyDecision is what the follower core decided for one write.
type ApplyDecision struct {
	Append    bool      // append Data and commit Record
	Duplicate bool      // already committed here: acknowledge, write nothing
	Err       *Error    // refuse with this error
	LeaveISR  bool      // and ask to leave the ISR
	Kind      ErrorKind // class of Err, for the leader's choice
}

// ErrorKind classes a follower's refusal as the seeds' CoordErr types do.
type ErrorKind int

const (
	KindNone      ErrorKind = iota
	KindLocal               // this node's disk or state failed
	KindFollower            // the write does not fit this replica's log
	KindTemporary           // a state that may pass: epoch mismatch, not in ISR yet
	KindCluster             // leadership or membership is wrong
)

// Follower refusals (reference §1.2).
var (
	ErrEpochMismatch   = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "epoch for write mismatch"}
	ErrPubArg          = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "record does not match its messages"}
	ErrWriteOnNonISR   = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write on a replica outside the ISR"}
	ErrOffsetMismatch  = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write offset mismatch"}
	ErrSizeMismatch    = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write size mismatch"}
	ErrDuplicateDiffer = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "resent record differs from the committed one"}
)

// NewFollower starts the apply path at the end of what is committed here.
// lookup finds a committed record by LogID, for resent writes.
func NewFollower(epoch int64, pos Position, lastLogID int64, lookup func(int64) (storage.CommitRecord, bool)) *Follower {
	return &Follower{epoch: epoch, inISR: true, writable: true, pos: pos, lastLog: lastLogID, lookup: lookup}
}

// SetISR and SetWritable follow the cluster's metadata; a new epoch makes a
// new Follower.
func (f *Follower) SetISR(in bool)     { f.inISR = in }
func (f *Follower) SetWritable(w bool) { f.writable = w }

// Position is the end of this replica's committed log.
func (f *Follower) Position() Position { return f.pos }

// Check decides what to do with one write, in the seeds' order: epoch gate,
// argument check, duplicate check, then the remaining gates and the
// offset and size checks.
func (f *Follower) Check(w ReplicaWriteIn) ApplyDecision {
	if w.EpochForWrite != f.epoch {
		return ApplyDecision{Err: ErrEpochMismatch, Kind: KindTemporary}
	}
	if err := checkArgs(w); err != nil {
		return ApplyDecision{Err: err, Kind: KindFollower, LeaveISR: true}
	}
	if w.Record.LogID <= f.lastLog {
		// With writes pipelined a reconnecting leader may resend several
		// records; any that match what is committed are acknowledged.
		if got, ok := f.lookup(w.Record.LogID); ok && sameRecord(got, w.Record) {
			return ApplyDecision{Duplicate: true}
		}
		return ApplyDecision{Err: ErrDuplicateDiffer, Kind: KindFollower, LeaveISR: true}
	}
	switch {
	case !f.writable:
		return ApplyDecision{Err: ErrNotWritable, Kind: KindCluster, LeaveISR: true}
	case !f.inISR:
		return ApplyDecision{Err: ErrWriteOnNonISR, Kind: KindTemporary, LeaveISR: true}
	case w.Record.MsgOffset != f.pos.End:
		return ApplyDecision{Err: ErrOffsetMismatch, Kind: KindFollower, LeaveISR: true}
	case int64(len(w.Data)) != int64(w.Record.MsgSize):
		return ApplyDecision{Err: ErrSizeMismatch, Kind: KindFollower, LeaveISR: true}
	}
	return ApplyDecision{Append: true}
}

// Applied records the outcome of appending and committing a checked write.
// On success the ID generator moves past the write's last ID, so if this
// replica is elected it never reissues an ID the old leader committed.
func (f *Follower) Applied(r storage.CommitRecord, err error) ApplyDecision {
	if err != nil {
		return ApplyDecision{Err: localError(err), Kind: KindLocal, LeaveISR: true}
	}
	f.pos = Position{NextID: uint64(r.LastMsgLogID) + 1, End: r.End(), Count: r.MsgCnt + int64(r.MsgNum) - 1}
	f.lastLog = r.LogID
	return ApplyDecision{}
}

func sameRecord(a, b storage.CommitRecord) bool {
	return a.LogID == b.LogID && a.LastMsgLogID == b.LastMsgLogID && a.MsgOffset == b.MsgOffset &&
		a.MsgSize == b.MsgSize && a.MsgCnt == b.MsgCnt && a.MsgNum == b.MsgNum
}

// checkArgs binds the record to exactly its payload: LogID is the first
// message's ID, LastMsgLogID the last's, MsgNum their count.
func checkArgs(w ReplicaWriteIn) *Error {
	data := w.Data
	var first, last uint64
	n := 0
	for len(data) > 0 {
		m, size, err := storage.DecodeMessage(data)
		if err != nil {
			return &Error{Code: ErrPubArg.Code, Text: fmt.Sprintf("%s: %v", ErrPubArg.Text, err)}
		}
		if n == 0 {
			first = m.ID
		}
		last = m.ID
		n++
		data = data[size:]
	}
	if n == 0 || int64(first) != w.Record.LogID || int64(last) != w.Record.LastMsgLogID || n != int(w.Record.MsgNum) {
		return ErrPubArg
	}
	return nil
}
