package topic

import (
	"fmt"

	"github.com/partitamq/partita/storage"
)

// Follower is the pure core of a follower's apply path
// (docs/replication.md#follower-apply; youzan/nsq's putMessageOnSlave and
// putMessagesOnSlave): it checks a leader's write against this replica's
// state and says whether to append it, acknowledge it as a duplicate, or
// refuse it. The shell appends and commits; the follower commits at once,
// before the leader does.
type Follower struct {
	epoch    int64 // EpochForWrite this replica accepts
	since    int64 // the epoch its leader's leadership began in; 0: unknown
	inISR    bool
	writable bool
	pos      Position
	lookup   RecordLookup
}

// RecordLookup finds a committed record by LogID and says its index in the
// commit log.
type RecordLookup func(logID int64) (rec storage.CommitRecord, index int64, ok bool)

// ReplicaWriteIn is a leader's write as the follower receives it.
type ReplicaWriteIn struct {
	EpochForWrite int64
	Record        storage.CommitRecord
	Prev          RecordRef // the record before it in the leader's log
	Data          []byte
	// FullSync: the leader has nothing before this record any more; a
	// replica that lacks Prev starts its log afresh at this record.
	FullSync bool
}

// ApplyDecision is what the follower core decided for one write.
type ApplyDecision struct {
	Append    bool      // append Data and commit Record
	Duplicate bool      // already committed here: acknowledge, write nothing
	Err       *Error    // refuse with this error
	LeaveISR  bool      // and ask to leave the ISR
	Kind      ErrorKind // class of Err, for the leader's choice
	// Truncate, with Append: this replica's log diverged from the leader's
	// after a record they share; cut back to it before appending.
	Truncate *Cut
}

// Cut is the point a diverged log is cut back to: the first Records commit
// records are kept, the data log ends at Pos.End. With Reset nothing is
// kept and the log starts afresh at Pos.End (a full sync).
type Cut struct {
	Records int64
	Pos     Position
	Reset   bool
}

// ErrorKind classes a follower's refusal as youzan/nsq's CoordErr types do.
type ErrorKind int

const (
	KindNone      ErrorKind = iota
	KindLocal               // this node's disk or state failed
	KindFollower            // the write does not fit this replica's log
	KindTemporary           // a state that may pass: epoch mismatch, not in ISR yet
	KindCluster             // leadership or membership is wrong
)

// Follower refusals (docs/replication.md#follower-apply).
var (
	ErrEpochMismatch   = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "epoch for write mismatch"}
	ErrPubArg          = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "record does not match its messages"}
	ErrWriteOnNonISR   = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write on a replica outside the ISR"}
	ErrOffsetMismatch  = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write offset mismatch"}
	ErrSizeMismatch    = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "write size mismatch"}
	ErrDuplicateDiffer = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "resent record differs from the committed one"}
	// ErrMissingPrev: this replica does not have the record the write
	// follows; the leader sends it what it lacks after the last record
	// they share.
	ErrMissingPrev = &Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "replica lacks the record before the write"}
)

// NewFollower starts the apply path at the end of what is committed here.
// lookup finds committed records, for resent writes and diverged logs.
func NewFollower(epoch int64, pos Position, lookup RecordLookup) *Follower {
	return &Follower{epoch: epoch, inISR: true, writable: true, pos: pos, lookup: lookup}
}

// FollowRole is the apply core for a role the metadata gives this replica
// as a follower: its epoch, whether it is in the ISR (or catching up,
// which applies writes alike), and the epoch its leader's leadership
// began in. prev is the core before it, nil if none. A core that took a
// later epoch from a leader's write than the metadata now names keeps
// that epoch, as a raft term never goes back, with the flags a replica
// written to has (epochGate): the metadata trails the leader's, and going
// back would refuse the leader that brought the epoch until it caught up,
// and take a deposed leader's writes and positions meanwhile.
func FollowRole(prev *Follower, epoch int64, inISR bool, leaderSince int64, pos Position, lookup RecordLookup) *Follower {
	f := NewFollower(epoch, pos, lookup)
	f.SetISR(inISR)
	f.SetLeaderSince(leaderSince)
	if prev != nil {
		f.epochGate(prev.epoch)
	}
	return f
}

// SetISR and SetWritable follow the cluster's metadata; a new epoch in it
// makes a new Follower.
func (f *Follower) SetISR(in bool)     { f.inISR = in }
func (f *Follower) SetWritable(w bool) { f.writable = w }

// SetLeaderSince names the epoch the present leadership began in, as the
// metadata says (0: it does not), for OffsetFrom.
func (f *Follower) SetLeaderSince(epoch int64) { f.since = epoch }

// Position is the end of this replica's committed log.
func (f *Follower) Position() Position { return f.pos }

// Check decides what to do with one write, in the order of
// docs/replication.md#follower-apply: epoch gate, argument check, duplicate
// check, then the remaining gates, where in the log the write goes, and the
// offset and size checks.
func (f *Follower) Check(w ReplicaWriteIn) ApplyDecision {
	if !f.epochGate(w.EpochForWrite) {
		return ApplyDecision{Err: ErrEpochMismatch, Kind: KindTemporary}
	}
	if err := checkArgs(w); err != nil {
		return ApplyDecision{Err: err, Kind: KindFollower, LeaveISR: true}
	}
	// With writes pipelined a reconnecting leader may resend several
	// records; any that match what is committed are acknowledged.
	// LogIDs increase along a log: only one at or below the last can be here.
	if w.Record.LogID <= f.pos.Last.LogID {
		if got, _, ok := f.lookup(w.Record.LogID); ok && got.Epoch == w.Record.Epoch {
			if sameRecord(got, w.Record) {
				return ApplyDecision{Duplicate: true}
			}
			return ApplyDecision{Err: ErrDuplicateDiffer, Kind: KindFollower, LeaveISR: true}
		}
	}
	switch {
	case !f.writable:
		return ApplyDecision{Err: ErrNotWritable, Kind: KindCluster, LeaveISR: true}
	case !f.inISR:
		return ApplyDecision{Err: ErrWriteOnNonISR, Kind: KindTemporary, LeaveISR: true}
	case int64(len(w.Data)) != int64(w.Record.MsgSize):
		return ApplyDecision{Err: ErrSizeMismatch, Kind: KindFollower, LeaveISR: true}
	}
	at := f.pos
	var cut *Cut
	if w.Prev != f.pos.Last {
		c, ok := f.cutAfter(w.Prev, w.Record)
		if !ok && w.FullSync {
			c, ok = Cut{Reset: true, Pos: Position{NextID: f.pos.NextID, End: w.Record.MsgOffset, Count: w.Record.MsgCnt - 1, Last: w.Prev}}, true
		}
		if !ok {
			return ApplyDecision{Err: ErrMissingPrev, Kind: KindFollower}
		}
		cut, at = &c, c.Pos
	}
	if w.Record.MsgOffset != at.End {
		return ApplyDecision{Err: ErrOffsetMismatch, Kind: KindFollower, LeaveISR: true}
	}
	return ApplyDecision{Append: true, Truncate: cut}
}

// CheckEmpty decides on a leader's probe of its empty log, sent while it
// has no write in flight: a replica that holds no record either has
// everything the leader has, and acknowledges it as a record it holds.
// One that holds records cuts them off first, as the leader's first write
// (which follows no record) would: they were never committed, or the
// leader, elected from the ISR, would hold them.
func (f *Follower) CheckEmpty(epochForWrite int64) ApplyDecision {
	if !f.epochGate(epochForWrite) {
		return ApplyDecision{Err: ErrEpochMismatch, Kind: KindTemporary}
	}
	if f.pos.Last == (RecordRef{}) && f.pos.End == 0 {
		return ApplyDecision{Duplicate: true}
	}
	return ApplyDecision{Duplicate: true, Truncate: &Cut{Pos: Position{NextID: f.pos.NextID}}}
}

// OffsetFrom says whether a channel position sent in epochForWrite may
// move this replica's channels. One of an epoch before the present
// leadership began is a deposed leader's: a full report of its positions
// may move a channel back past FINs its successor confirmed on this
// replica, which, elected next, would deliver them again. One of an
// epoch since is the present leader's, even when it has not yet heard of
// a join or a re-enable that raised the epoch here. Zero is a node that
// does not stamp its positions, taken as before.
func (f *Follower) OffsetFrom(epochForWrite int64) bool {
	since := f.epoch
	if f.since > 0 && f.since < f.epoch {
		since = f.since
	}
	return epochForWrite == 0 || epochForWrite >= since
}

// epochGate passes a write of this replica's epoch or a later one. A later
// epoch is a leadership elected since, whose leader reached this replica
// before the metadata watch did: the store hands each epoch to one leader
// only, and that leader's writes commit only once every member of its ISR
// has them, so taking its epoch now, as a raft follower takes a higher
// term from the leader that brings it, changes no commit (it only lets
// this replica's acknowledgement count sooner). From then on the earlier
// epoch's leader is refused here, as after the watch. An earlier epoch
// is a deposed leader's, refused as temporary: the leader sends again
// once it hears of the epoch that moved on.
//
// The metadata this replica knows is older than the leader's, so its ISR
// and writable flags are too: a leader writes only while the partition is
// writable, and only to the members of its ISR and the replicas catching
// up, both of which apply writes. Kept, they would refuse a leader that
// re-enabled writes or took this replica into its ISR in the new epoch,
// and a refusal of that kind shrinks the ISR.
func (f *Follower) epochGate(epochForWrite int64) bool {
	if epochForWrite < f.epoch {
		return false
	}
	if epochForWrite > f.epoch {
		f.epoch, f.inISR, f.writable = epochForWrite, true, true
		// A new leadership and a join under the present one look alike
		// from here: the fence on channel positions falls back to the
		// epoch taken, so a deposed leader's cannot pass it.
		f.since = 0
	}
	return true
}

// Epoch is the EpochForWrite this replica accepts now: the metadata's, or
// a later one a leader brought first.
func (f *Follower) Epoch() int64 { return f.epoch }

// cutAfter finds prev in this replica's log: the leader's write follows a
// record this replica has, but not as its last, so what comes after prev
// here diverged from the leader's log (writes of a deposed leader that were
// never committed cluster-wide) and is cut off. A zero prev is the start of
// the log, where next begins.
func (f *Follower) cutAfter(prev RecordRef, next storage.CommitRecord) (Cut, bool) {
	if prev == (RecordRef{}) {
		return Cut{Pos: Position{NextID: f.pos.NextID, End: next.MsgOffset, Count: next.MsgCnt - 1}}, true
	}
	r, i, ok := f.lookup(prev.LogID)
	if !ok || r.Epoch != prev.Epoch {
		return Cut{}, false
	}
	// The generator keeps its place: IDs the cut records used stay used.
	return Cut{Records: i + 1, Pos: Position{NextID: f.pos.NextID, End: r.End(), Count: r.LastCount(), Last: prev}}, true
}

// Truncated records that the shell cut the log back as Check decided.
func (f *Follower) Truncated(c Cut) { f.pos = c.Pos }

// Applied records the outcome of appending and committing a checked write.
// On success the ID generator moves past the write's last ID, so if this
// replica is elected it never reissues an ID the old leader committed.
func (f *Follower) Applied(r storage.CommitRecord, err error) ApplyDecision {
	if err != nil {
		return ApplyDecision{Err: localError(err), Kind: KindLocal, LeaveISR: true}
	}
	f.Accepted(r)
	return ApplyDecision{}
}

// Accepted moves the position past a write Check let append, before the
// shell has written it: the next write of the same frame is checked
// against it, and the shell writes the frame's run of accepted writes with
// one write per file. It returns the position before r, where a run that
// fails to be written goes back to (RunFailed).
func (f *Follower) Accepted(r storage.CommitRecord) Position {
	before := f.pos
	f.pos = Position{NextID: max(f.pos.NextID, uint64(r.LastMsgLogID)+1), End: r.End(), Count: r.LastCount(), Last: Ref(r)}
	return before
}

// RunFailed: writing a run of accepted writes failed, so none of them is
// here; the position goes back to where the run started.
func (f *Follower) RunFailed(start Position, err error) ApplyDecision {
	f.pos = start
	return ApplyDecision{Err: localError(err), Kind: KindLocal, LeaveISR: true}
}

func sameRecord(a, b storage.CommitRecord) bool {
	return a.LogID == b.LogID && a.Epoch == b.Epoch && a.LastMsgLogID == b.LastMsgLogID && a.MsgOffset == b.MsgOffset &&
		a.MsgSize == b.MsgSize && a.MsgCnt == b.MsgCnt && a.MsgNum == b.MsgNum
}

// checkArgs binds the record to exactly its payload: LogID is the first
// message's ID, LastMsgLogID the last's, MsgNum their count, and the IDs
// between strictly increase.
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
		} else if m.ID <= last {
			// IDs strictly increase within a partition (ids.go); a
			// record with a repeated or reordered ID would be handed out
			// twice or out of order.
			return &Error{Code: ErrPubArg.Code, Text: ErrPubArg.Text + ": message IDs do not increase"}
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
