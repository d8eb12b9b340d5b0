package topic

import (
	"slices"
	"time"

	"github.com/partitamq/partita/storage"
)

// Writer is the pure core of a partition leader's write flow: publishes in,
// records to append, replica sends, commits and replies out. It owns no
// goroutine, clock or file; the actor shell feeds it and performs what it
// returns, so every rule here is tested by feeding it inputs in order.
//
// The flow per write: gates → local write (IDs assigned, appended
// uncommitted) → replica sync to every ISR follower in parallel → commit
// strictly in LogID order once every follower acked → answer the publishers.
// Several writes may be in flight at once (the window); publishes that queue
// while a write is being made are coalesced into one record (group commit).
type Writer struct {
	cfg      WriterConfig
	pos      Position // after the last locally written record
	writable bool
	held     bool // publishes queue but no write starts: the ISR is changing
	// handingOver: publishes queue but no write starts, so the writes in
	// flight commit before a planned move hands the leadership on
	// (HandOver).
	handingOver bool
	// leadEpoch is the EpochForWrite this leadership began in. The epoch
	// itself also grows when a follower joins the ISR; this does not.
	leadEpoch int64
	// committed: this leadership has committed a record; the writes
	// begun before that are settling (Reply.Settling).
	committed bool

	waiting     []Publish
	waitingMsgs int
	deadlined   int      // waiting publishes with a deadline: Expire has nothing to look for without them
	inflight    []*Write // in LogID order
	shrinking   []string // followers being removed from the ISR in metadata
	// failedShrinkOf is the LogID of the head write when a shrink last
	// failed: past WriteTimeout such a write steps down rather than try
	// again and again.
	failedShrinkOf int64

	// dedupe is the window of producer message IDs, nil when off: then
	// no publish costs a lookup.
	dedupe *Dedupe
	// parked are publishes with an ID another publish is writing; they
	// wait for its outcome (unpark).
	parked []Publish
}

// WriterConfig holds what the cluster and the flags decide for one partition.
type WriterConfig struct {
	Partition int32
	Epoch     int64    // EpochForWrite, stamped on every record
	Followers []string // ISR members other than this node
	Replicas  int      // configured replica count

	Window           int // writes in flight at once
	MaxBatchMessages int // group commit: messages per record at most
	MaxBatchBytes    int // group commit: encoded bytes per record at most
	MaxWaiting       int // messages queued behind the window before E_PUB_TOO_MUCH_WAITING
	WriteTimeout     time.Duration
	// ShrinkAfter is how long a write waits for a follower before the
	// followers it still waits for leave the ISR, if a majority acked,
	// unless LagMax is set.
	ShrinkAfter time.Duration
	// LagMax, when set, replaces ShrinkAfter for that rule. A follower
	// that failed a write or whose stream is down leaves at once (Acked,
	// FollowerDown); one that is merely behind is alive and connected, and
	// on a saturated machine every follower is behind somewhere. Kafka's
	// rule (replica.lag.time.max.ms) keeps such a follower until it has
	// been behind for a long window; so does this, so that load turns into
	// slower answers and refusals rather than a storm of ISR changes.
	LagMax time.Duration
}

// Position is the end of a partition's log: the next ID to hand out, the
// byte offset, the message count and the last record.
type Position struct {
	NextID uint64
	End    int64
	Count  int64
	Last   RecordRef // zero when the log is empty
}

// RecordRef names a commit record across leaders: each leader issues a LogID
// once, and each leader writes in its own epoch.
type RecordRef struct {
	LogID int64
	Epoch int64
}

// Ref names r.
func Ref(r storage.CommitRecord) RecordRef { return RecordRef{LogID: r.LogID, Epoch: r.Epoch} }

// Publish is one PUB, MPUB or DPUB waiting to be written.
type Publish struct {
	Bodies     [][]byte
	DeliverAt  int64 // unix nanos; 0 delivers at once (DPUB sets it)
	Token      any   // handed back in the Reply
	ReceivedAt time.Time
	// Traces are the bodies' trace IDs (PUB_TRACE), nil when untraced.
	Traces []uint64
	// Headers are the bodies' JSON headers (PUB_EXT), nil when none has
	// one; an empty one stores none.
	Headers [][]byte
	// Delayed, when set, marks the message as a channel-delayed copy.
	Delayed *DelayedCopy
	// Deadline, when set, is the last moment the publish may take its
	// place in the log: a forwarded publish carries its forwarder's
	// (broker/forward.go). At or after it the publish is refused and
	// never written, because its forwarder may have told the client it
	// failed, and a write then could land behind publishes acknowledged
	// since. Once a record holds it, a deadline no longer matters: its
	// place among later publishes is fixed.
	Deadline time.Time
	// SeenEpoch, when set, is the partition's EpochForWrite in the state
	// the forwarder chose this node as leader from. A leadership that
	// began after it is not the one the forwarder sent to: between the
	// two, another node may have led and taken publishes the client made
	// after hearing this one failed, so it is refused and never written.
	SeenEpoch int64
	// IDs are the producers' message IDs (##msg_id), "" for a message
	// without; nil when none has one.
	IDs []string

	owned []dedupeRef // the pending dedupe entries of its messages
	// isrWait: it waited while the ISR changed, so its write is settling.
	isrWait bool
}

// expired reports whether p's deadline has passed at now.
func (p *Publish) expired(now time.Time) bool {
	return !p.Deadline.IsZero() && !now.Before(p.Deadline)
}

// Write is one record on its way through the flow.
type Write struct {
	Record    storage.CommitRecord
	Prev      RecordRef // the record before it in this log
	Data      []byte    // encoded messages, exactly as appended and replicated
	StartedAt time.Time

	// settling: begun before the leadership's first commit, or waited
	// for the ISR to change (Reply.Settling).
	settling bool
	tokens   []any
	spans    []span      // where each token's messages went, for its reply
	ids      []dedupeRef // the messages' dedupe entries, nil without any
	pending  nodeSet     // followers that have not acked yet
	failed   nodeSet     // followers that refused it or went down
}

// nodeSet is a handful of follower IDs: at replica counts a slice is
// cheaper to make and search than a map, and writes make one per record.
type nodeSet []string

func (s nodeSet) has(node string) bool { return slices.Contains(s, node) }

func (s *nodeSet) add(node string) {
	if !s.has(node) {
		*s = append(*s, node)
	}
}

func (s *nodeSet) remove(node string) {
	if i := slices.Index(*s, node); i >= 0 {
		*s = slices.Delete(*s, i, i+1)
	}
}

// Reply answers one Publish.
type Reply struct {
	Token   any
	FirstID uint64 // of the record holding the publish
	Err     *Error
	// MsgID, Offset and Size are the publish's own first message ID, the
	// log offset of its first message and its encoded bytes (PUB_TRACE).
	MsgID  uint64
	Offset int64
	Size   int32
	// Settling: the write began before this leadership's first commit, or
	// was in flight or waiting while the ISR changed, so its wait was the
	// leadership settling in (followers turning to the new leader) or a
	// follower leaving or joining, not a queue: admission does not read
	// it as load.
	Settling bool
}

// ReplicaSend asks the shell to send a locally written record to a follower.
type ReplicaSend struct {
	Node  string
	Write *Write
}

// Ready is what one input made the core decide; the shell performs it in
// field order.
type Ready struct {
	Truncate *int64 // roll the log back to this offset before anything else
	Sends    []ReplicaSend
	Commits  []storage.CommitRecord // append, in order, then announce the end
	Replies  []Reply
	// ShrinkISR asks the shell to remove these followers from the ISR in
	// the partition's metadata (compare-and-swap) and report ISRShrunk.
	// Writes waiting on them commit only once the smaller ISR is durable,
	// so a removed follower can never be elected with an acknowledged
	// write missing.
	ShrinkISR []string
	// LeaveISR: this leader failed a write it could not roll forward; it
	// has disabled writes and must leave the ISR so another is elected.
	LeaveISR bool
	// unpark: publishes parked on IDs of these Commits are settled by
	// Writer.unpark once the commits are on disk, not before: one
	// answered from an ID whose commit then fails would be answered OK
	// without being in the log.
	unpark bool
}

func (r *Ready) merge(o Ready) {
	if o.Truncate != nil {
		r.Truncate = o.Truncate
	}
	r.Sends = append(r.Sends, o.Sends...)
	r.Commits = append(r.Commits, o.Commits...)
	r.Replies = append(r.Replies, o.Replies...)
	r.ShrinkISR = append(r.ShrinkISR, o.ShrinkISR...)
	r.LeaveISR = r.LeaveISR || o.LeaveISR
	r.unpark = r.unpark || o.unpark
}

// NewWriter starts the write flow at the end of what is committed on disk.
func NewWriter(cfg WriterConfig, pos Position) *Writer {
	if cfg.Window <= 0 {
		cfg.Window = 1
	}
	if cfg.MaxBatchMessages <= 0 {
		cfg.MaxBatchMessages = 1000
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = 4 << 20
	}
	if pos.NextID < FirstID(cfg.Partition) {
		pos.NextID = FirstID(cfg.Partition)
	}
	return &Writer{cfg: cfg, pos: pos, writable: true, leadEpoch: cfg.Epoch}
}

// Position returns the end of the locally written log.
func (w *Writer) Position() Position { return w.pos }

// Writable reports whether the partition takes writes.
func (w *Writer) Writable() bool { return w.writable }

// InFlight is the number of records written locally but not committed.
func (w *Writer) InFlight() int { return len(w.inflight) }

// Waiting is the number of messages queued for a write.
func (w *Writer) Waiting() int { return w.waitingMsgs }

// Offer queues a publish, or answers at once when a gate refuses it.
func (w *Writer) Offer(p Publish) *Reply {
	if p.expired(p.ReceivedAt) {
		return &Reply{Token: p.Token, Err: ErrDeadlinePassed}
	}
	if p.SeenEpoch > 0 && p.SeenEpoch < w.leadEpoch {
		return &Reply{Token: p.Token, Err: ErrEarlierLeadership}
	}
	if err := w.gate(); err != nil {
		return &Reply{Token: p.Token, Err: err}
	}
	if w.dedupe != nil && p.IDs != nil {
		switch v, r := w.dedupe.check(&p, p.ReceivedAt); v {
		case answers:
			return &r
		case waits:
			w.parked = append(w.parked, p)
			return nil
		}
	}
	if w.cfg.MaxWaiting > 0 && w.waitingMsgs > 0 && w.waitingMsgs+len(p.Bodies) > w.cfg.MaxWaiting {
		if p.owned != nil {
			// Refused: its IDs are not on their way, and a retry must
			// not wait for them.
			w.dedupe.release(p.owned)
		}
		return &Reply{Token: p.Token, Err: ErrTooMuchWaiting}
	}
	w.waiting = append(w.waiting, p)
	w.waitingMsgs += len(p.Bodies)
	if !p.Deadline.IsZero() {
		w.deadlined++
	}
	return nil
}

// gate checks the gates of docs/replication.md#write-gates that a single
// partition can know: writes enabled and a quorum in the ISR.
func (w *Writer) gate() *Error {
	if !w.writable {
		return ErrNotWritable
	}
	if isr := len(w.cfg.Followers) + 1; isr <= w.cfg.Replicas/2 {
		return ErrWriteQuorum
	}
	return nil
}

// NextWrite takes the waiting publishes that fit into one record, assigns
// their IDs and encodes them. It returns nil when nothing waits or the window
// is full. The shell appends Data at Record.MsgOffset and then calls
// LocalWritten.
//
// Publishes whose deadline passed at now must be taken out by Expire,
// with the same now, just before: that is the last moment a publish can
// still be refused without a trace.
func (w *Writer) NextWrite(now time.Time) *Write {
	if len(w.waiting) == 0 || !w.canStart() {
		return nil
	}
	taken, size := w.batch(now)
	wr := &Write{StartedAt: now, settling: !w.committed, Prev: w.pos.Last, Data: make([]byte, 0, size), tokens: make([]any, 0, taken), spans: make([]span, 0, taken)}
	first := w.pos.NextID
	id := first
	var msgs int
	for _, p := range w.waiting[:taken] {
		wr.settling = wr.settling || p.isrWait
		sp := span{id: id, offset: w.pos.End + int64(len(wr.Data))}
		for i, b := range p.Bodies {
			m := publishedMessage(p, i, id, now)
			m.Body = b
			at := len(wr.Data)
			wr.Data = storage.AppendMessage(wr.Data, &m)
			if p.owned != nil && p.owned[i] != 0 {
				w.dedupe.written(p.owned[i], id, w.pos.End+int64(at), int32(len(wr.Data)-at), m.Timestamp)
				wr.ids = append(wr.ids, p.owned[i])
			}
			id++
		}
		sp.size = int32(w.pos.End + int64(len(wr.Data)) - sp.offset)
		msgs += len(p.Bodies)
		if !p.Deadline.IsZero() {
			w.deadlined--
		}
		wr.tokens = append(wr.tokens, p.Token)
		wr.spans = append(wr.spans, sp)
	}
	w.waiting = w.waiting[taken:]
	w.waitingMsgs -= msgs
	wr.Record = storage.CommitRecord{
		LogID:        int64(first),
		Epoch:        w.cfg.Epoch,
		LastMsgLogID: int64(id - 1),
		MsgOffset:    w.pos.End,
		MsgSize:      int32(len(wr.Data)),
		MsgCnt:       w.pos.Count + 1,
		MsgNum:       int32(msgs),
	}
	w.pos = Position{NextID: id, End: w.pos.End + int64(len(wr.Data)), Count: w.pos.Count + int64(msgs), Last: Ref(wr.Record)}
	wr.pending = slices.Clone(nodeSet(w.cfg.Followers))
	w.inflight = append(w.inflight, wr)
	return wr
}

// canStart reports whether a write may start now: room in the window,
// writes enabled and not held.
func (w *Writer) canStart() bool {
	return len(w.inflight) < w.cfg.Window && w.writable && !w.held && !w.handingOver
}

// Expire refuses the waiting publishes the next write could take whose
// deadline has passed at now, and answers them. It looks no further than
// one record's worth of messages within their deadlines, all that
// NextWrite may take, so a long queue behind a full window is not scanned
// at every write; publishes further back are looked at when they come
// near the front, and one refused on the way is gone. A publish
// waiting while no write can start stays queued: it is refused when a
// write could take it, or answered with the rest if the partition stops
// taking writes.
func (w *Writer) Expire(now time.Time) []Reply {
	if w.deadlined == 0 || !w.canStart() {
		return nil
	}
	var out []Reply
	kept, msgs, i := 0, 0, 0
	for ; i < len(w.waiting) && msgs < w.cfg.MaxBatchMessages; i++ {
		p := w.waiting[i]
		if p.expired(now) {
			out = append(out, Reply{Token: p.Token, Err: ErrDeadlinePassed})
			w.waitingMsgs -= len(p.Bodies)
			w.deadlined--
			if p.owned != nil {
				w.dedupe.release(p.owned)
			}
			continue
		}
		w.waiting[kept] = p
		kept++
		msgs += len(p.Bodies)
	}
	if len(out) > 0 {
		n := len(w.waiting)
		w.waiting = append(w.waiting[:kept], w.waiting[i:]...)
		clear(w.waiting[len(w.waiting):n])
		out = append(out, w.unpark()...)
	}
	return out
}

// batch is how many waiting publishes the next record takes, at least one
// and within MaxBatchMessages and MaxBatchBytes, and their encoded size.
func (w *Writer) batch(now time.Time) (taken, size int) {
	msgs := 0
	for _, p := range w.waiting {
		bytes := 0
		for i, b := range p.Bodies {
			m := publishedMessage(p, i, 0, now)
			m.Body = b
			bytes += storage.EncodedSize(&m)
		}
		if taken > 0 && (msgs+len(p.Bodies) > w.cfg.MaxBatchMessages || size+bytes > w.cfg.MaxBatchBytes) {
			break
		}
		taken, msgs, size = taken+1, msgs+len(p.Bodies), size+bytes
	}
	return taken, size
}

// LocalWritten reports the outcome of appending a write's Data locally.
func (w *Writer) LocalWritten(logID int64, err error) Ready {
	i := w.find(logID)
	if i < 0 {
		return Ready{}
	}
	if err != nil {
		// Only the newest write can be mid-append, so cutting from it drops
		// nothing else; IDs stay consumed.
		return w.fail(i, localError(err))
	}
	wr := w.inflight[i]
	var r Ready
	for _, f := range w.cfg.Followers {
		r.Sends = append(r.Sends, ReplicaSend{Node: f, Write: wr})
	}
	r.merge(w.commitReady())
	return r
}

// Acked records a follower's answer to a replica send. A success covers
// every write up to logID: the follower appends a write only after the
// record it follows, so having logID it has all this leader wrote before
// it (followers answer a frame of writes with one ack). A refusal is of
// the one write.
func (w *Writer) Acked(node string, logID int64, err error) Ready {
	if err != nil {
		i := w.find(logID)
		if i < 0 {
			return Ready{}
		}
		return w.followerFailed(node, w.inflight[i:i+1])
	}
	for _, wr := range w.inflight {
		if wr.Record.LogID > logID {
			break
		}
		if !wr.failed.has(node) {
			wr.pending.remove(node)
		}
	}
	r := w.commitReady()
	r.merge(w.shrinkFailed())
	return r
}

// FollowerDown: the stream to a follower broke or its heartbeats stopped;
// every write waiting on it counts it as failed.
func (w *Writer) FollowerDown(node string) Ready {
	return w.followerFailed(node, w.inflight)
}

// FollowerBack: the stream to node connected again. The writes that
// counted it failed wait for its answer again, since the shell sends them
// again: a follower's stream that broke and came back lost the writes sent
// meanwhile, and with no majority to shrink it out with they would wait
// for WriteTimeout. It reports whether any write counted node failed.
func (w *Writer) FollowerBack(node string) bool {
	back := false
	for _, wr := range w.inflight {
		if wr.failed.has(node) {
			wr.failed.remove(node)
			back = true
		}
	}
	return back
}

// followerFailed marks node failed for writes. A write that can no longer
// reach a majority fails at once (youzan/nsq's exitErr > len(ISR)/2); others
// wait for the follower to be shrunk out of the ISR.
func (w *Writer) followerFailed(node string, writes []*Write) Ready {
	isr := len(w.cfg.Followers) + 1
	for _, wr := range writes {
		if !wr.pending.has(node) {
			continue
		}
		wr.failed.add(node)
		if len(wr.failed) > isr/2 {
			return w.stepDown(w.find(wr.Record.LogID), ErrWriteQuorum)
		}
	}
	return w.shrinkFailed()
}

// shrinkFailed removes followers known to have failed the oldest write as
// soon as the rest of the ISR acknowledged it: there is nothing to wait for.
func (w *Writer) shrinkFailed() Ready {
	if len(w.inflight) == 0 || len(w.shrinking) > 0 {
		return Ready{}
	}
	head := w.inflight[0]
	if len(head.failed) == 0 || len(head.failed) != len(head.pending) {
		return Ready{}
	}
	if acked := 1 + len(w.cfg.Followers) - len(head.pending); acked <= w.cfg.Replicas/2 {
		return Ready{}
	}
	for _, f := range w.cfg.Followers {
		if head.failed.has(f) {
			w.shrinking = append(w.shrinking, f)
		}
	}
	return Ready{ShrinkISR: append([]string(nil), w.shrinking...)}
}

// ShrinkDown: writes are disabled and the streams to the followers down
// are down, so the next write would fail the same way. When the leader and
// the other followers are a majority of the replicas, as a write's acks
// would have to be, the followers down leave the ISR and writes can be
// re-enabled without waiting for them to come back.
func (w *Writer) ShrinkDown(down []string) Ready {
	if w.writable || len(w.shrinking) > 0 {
		return Ready{}
	}
	var out []string
	for _, f := range w.cfg.Followers {
		if slices.Contains(down, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 || 1+len(w.cfg.Followers)-len(out) <= w.cfg.Replicas/2 {
		return Ready{}
	}
	w.shrinking = out
	return Ready{ShrinkISR: append([]string(nil), out...)}
}

// Tick applies the time rules: a write waiting on followers for the lag
// window (LagMax, else ShrinkAfter) with a majority acked shrinks the ISR;
// a write older than WriteTimeout that no majority acked fails with every
// write after it, and the leader steps down. One a majority did ack is
// safe to commit once its laggards are out, so at WriteTimeout it shrinks
// them (or waits for the shrink under way) instead: stepping down would
// leave the partition without a leader for want of one slow follower.
func (w *Writer) Tick(now time.Time) Ready {
	if len(w.inflight) == 0 {
		return Ready{}
	}
	head := w.inflight[0]
	age := now.Sub(head.StartedAt)
	if w.cfg.WriteTimeout > 0 && age >= w.cfg.WriteTimeout {
		if !w.majorityAcked(head) || w.failedShrinkOf == head.Record.LogID {
			return w.stepDown(0, ErrWriteTimeout)
		}
		if len(w.shrinking) > 0 {
			return Ready{}
		}
		return w.shrinkPending(head)
	}
	if w.shrinkWaits(head) && age >= w.lagMax() {
		return w.shrinkPending(head)
	}
	return Ready{}
}

// shrinkPending asks to remove the followers head still waits for.
func (w *Writer) shrinkPending(head *Write) Ready {
	for _, f := range w.cfg.Followers {
		if head.pending.has(f) {
			w.shrinking = append(w.shrinking, f)
		}
	}
	return Ready{ShrinkISR: append([]string(nil), w.shrinking...)}
}

// majorityAcked reports whether the leader and the followers that acked
// head are a majority of the replicas.
func (w *Writer) majorityAcked(head *Write) bool {
	return 1+len(w.cfg.Followers)-len(head.pending) > w.cfg.Replicas/2
}

// lagMax is how long a write waits for a follower that is behind.
func (w *Writer) lagMax() time.Duration {
	if w.cfg.LagMax > 0 {
		return w.cfg.LagMax
	}
	return w.cfg.ShrinkAfter
}

// shrinkWaits reports whether the head write's slow followers leave the ISR
// once it is lagMax old: some follower has not acked, a majority has,
// and no shrink is under way.
func (w *Writer) shrinkWaits(head *Write) bool {
	if w.lagMax() <= 0 || len(w.shrinking) > 0 || len(head.pending) == 0 {
		return false
	}
	return w.majorityAcked(head)
}

// NextDeadline is the earliest time at which Tick would act, zero when no
// time rule is pending: the shell arms one timer for it instead of ticking.
// A shrink still waiting for a majority of acks has no deadline yet; the ack
// that makes the majority changes the answer, and the shell asks again
// after every input.
func (w *Writer) NextDeadline() time.Time {
	if len(w.inflight) == 0 {
		return time.Time{}
	}
	head := w.inflight[0]
	var due time.Time
	// A shrink under way for a write a majority acked settles it: its
	// answer, not the clock, is what comes next.
	if w.cfg.WriteTimeout > 0 && !(len(w.shrinking) > 0 && w.majorityAcked(head)) {
		due = head.StartedAt.Add(w.cfg.WriteTimeout)
	}
	if w.shrinkWaits(head) {
		due = earliest(due, head.StartedAt.Add(w.lagMax()))
	}
	return due
}

// Idle reports whether the write flow has nothing queued, in flight or
// being shrunk.
func (w *Writer) Idle() bool {
	return len(w.waiting) == 0 && len(w.inflight) == 0 && len(w.shrinking) == 0 && len(w.parked) == 0
}

// earliest is the earliest of the given times, zero ones meaning "none";
// zero when all are.
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// ISRShrunk reports the outcome of a ShrinkISR. Once the smaller ISR is in
// the metadata, writes stop waiting for the removed followers.
func (w *Writer) ISRShrunk(err error) Ready {
	removed := w.shrinking
	w.shrinking = nil
	if err != nil {
		if len(w.inflight) > 0 {
			w.failedShrinkOf = w.inflight[0].Record.LogID
		}
		return Ready{}
	}
	for _, node := range removed {
		w.removeFollower(node)
	}
	w.waitedForISR()
	return w.commitReady()
}

// waitedForISR marks what is in flight or waiting as settling: the ISR
// just changed, and everything queued behind the change waited for it.
func (w *Writer) waitedForISR() {
	for _, wr := range w.inflight {
		wr.settling = true
	}
	for i := range w.waiting {
		w.waiting[i].isrWait = true
	}
}

// SetFollowers replaces the ISR followers (metadata changed). Writes stop
// waiting for followers that left.
func (w *Writer) SetFollowers(followers []string, epoch int64) Ready {
	keep := make(map[string]bool, len(followers))
	for _, f := range followers {
		keep[f] = true
	}
	left := false
	for _, f := range append([]string(nil), w.cfg.Followers...) {
		if !keep[f] {
			w.removeFollower(f)
			left = true
		}
	}
	if left {
		w.waitedForISR()
	}
	w.cfg.Followers = append([]string(nil), followers...)
	w.cfg.Epoch = epoch
	return w.commitReady()
}

// LeadEpoch is the EpochForWrite this leadership began in.
func (w *Writer) LeadEpoch() int64 { return w.leadEpoch }

// Epoch is the EpochForWrite stamped on new records.
func (w *Writer) Epoch() int64 { return w.cfg.Epoch }

// InFlightWrites are the writes sent and not yet committed, in order.
func (w *Writer) InFlightWrites() []*Write { return w.inflight }

// Followers are the ISR members other than this node.
func (w *Writer) Followers() []string { return w.cfg.Followers }

func (w *Writer) removeFollower(node string) {
	for i, f := range w.cfg.Followers {
		if f == node {
			w.cfg.Followers = append(w.cfg.Followers[:i:i], w.cfg.Followers[i+1:]...)
			break
		}
	}
	for _, wr := range w.inflight {
		wr.pending.remove(node)
		wr.failed.remove(node)
	}
}

// stepDown fails write i and everything after it, rolls the log back,
// disables writes and sets LeaveISR
// (docs/replication.md#no-majority-step-down).
func (w *Writer) stepDown(i int, err *Error) Ready {
	r := w.fail(i, err)
	w.writable = false
	r.Replies = append(r.Replies, w.rejectWaiting(ErrNotWritable)...)
	r.LeaveISR = true
	return r
}

// Abandon fails every write in flight with err and restarts the log at pos,
// the committed end: committing to this node's own disk failed. IDs stay
// consumed, and the role (followers, epoch) is kept.
func (w *Writer) Abandon(pos Position, err *Error) Ready {
	var r Ready
	for _, wr := range w.inflight {
		for _, t := range wr.tokens {
			r.Replies = append(r.Replies, Reply{Token: t, Err: err})
		}
	}
	if w.dedupe != nil {
		w.dedupe.forgetFrom(pos.NextID)
		w.releaseWrites(w.inflight)
	}
	w.inflight = nil
	pos.NextID = max(pos.NextID, w.pos.NextID)
	w.pos = pos
	r.Replies = append(r.Replies, w.unpark()...)
	return r
}

// Disable stops taking writes and answers everything queued.
func (w *Writer) Disable() Ready {
	w.writable = false
	return Ready{Replies: w.rejectWaiting(ErrNotWritable)}
}

// Deposed stops taking writes as the leadership ends, and refuses
// everything queued with ErrDeposed: none of it was written.
func (w *Writer) Deposed() Ready {
	w.writable = false
	return Ready{Replies: w.rejectWaiting(ErrDeposed)}
}

// Enable takes writes again.
func (w *Writer) Enable() { w.writable = true }

// Hold lets publishes queue without starting a write, so the writes in
// flight drain; Release starts writing again. A replica joins the ISR in
// between, when nothing of the old epoch is in flight.
func (w *Writer) Hold()      { w.held = true }
func (w *Writer) Held() bool { return w.held }

// HandOver holds writes for a planned leader move: publishes queue, no
// write starts, and the writes in flight go on to commit. Once none is
// in flight (Drained), the move fails none of them, and the publishes
// queued go on to the next leader, never written here (Deposed).
// EndHandOver writes again, when the move did not come.
func (w *Writer) HandOver()         { w.handingOver = true }
func (w *Writer) EndHandOver()      { w.handingOver = false }
func (w *Writer) HandingOver() bool { return w.handingOver }

// Drained reports whether a hand-over holds writes with none in flight.
func (w *Writer) Drained() bool { return w.handingOver && len(w.inflight) == 0 }

// Release ends a Hold; what queued meanwhile waited for the ISR change.
func (w *Writer) Release() {
	if w.held {
		w.waitedForISR()
	}
	w.held = false
}

func (w *Writer) rejectWaiting(err *Error) []Reply {
	var out []Reply
	for _, p := range w.waiting {
		out = append(out, Reply{Token: p.Token, Err: err})
		if p.owned != nil {
			w.dedupe.release(p.owned)
		}
	}
	// A publish parked behind one that is refused here would be written
	// once unparked; the partition no longer takes writes, so it is
	// refused the same.
	for _, p := range w.parked {
		out = append(out, Reply{Token: p.Token, Err: err})
	}
	w.waiting, w.waitingMsgs, w.deadlined, w.parked = nil, 0, 0, nil
	return out
}

// commitReady commits, in LogID order, every head write that all followers
// acked.
func (w *Writer) commitReady() Ready {
	var r Ready
	for len(w.inflight) > 0 && len(w.inflight[0].pending) == 0 {
		wr := w.inflight[0]
		w.inflight = w.inflight[1:]
		r.Commits = append(r.Commits, wr.Record)
		id := uint64(wr.Record.LogID)
		for i, t := range wr.tokens {
			sp := wr.spans[i]
			r.Replies = append(r.Replies, Reply{Token: t, FirstID: id, MsgID: sp.id, Offset: sp.offset, Size: sp.size, Settling: wr.settling})
		}
		if wr.ids != nil {
			w.dedupe.commit(wr.ids)
		}
		w.committed = true
	}
	r.unpark = len(w.parked) > 0 && len(r.Commits) > 0
	return r
}

// fail answers write i and every later in-flight write with err and rolls
// the log back to write i's offset.
func (w *Writer) fail(i int, err *Error) Ready {
	var r Ready
	for _, wr := range w.inflight[i:] {
		for _, t := range wr.tokens {
			r.Replies = append(r.Replies, Reply{Token: t, Err: err})
		}
	}
	if w.dedupe != nil {
		w.releaseWrites(w.inflight[i:])
	}
	first := w.inflight[i].Record
	w.pos.End = first.MsgOffset
	w.pos.Count = first.MsgCnt - 1
	w.pos.Last = w.inflight[i].Prev
	w.inflight = w.inflight[:i]
	off := first.MsgOffset
	r.Truncate = &off
	r.Replies = append(r.Replies, w.unpark()...)
	return r
}

func (w *Writer) find(logID int64) int {
	for i, wr := range w.inflight {
		if wr.Record.LogID == logID {
			return i
		}
	}
	return -1
}

// releaseWrites forgets the pending IDs of writes that failed.
func (w *Writer) releaseWrites(writes []*Write) {
	for _, wr := range writes {
		w.dedupe.release(wr.ids)
	}
}

// unpark looks again at the publishes that waited for another's outcome:
// one whose IDs are all settled is answered, when the other was written,
// or queued, when it failed and nothing of it is in the log. Those still
// waiting stay parked.
func (w *Writer) unpark() []Reply {
	if len(w.parked) == 0 {
		return nil
	}
	var out []Reply
	parked := w.parked
	w.parked = nil
	for _, p := range parked {
		switch v, r := w.dedupe.check(&p, p.ReceivedAt); v {
		case answers:
			out = append(out, r)
		case waits:
			w.parked = append(w.parked, p)
		default:
			w.waiting = append(w.waiting, p)
			w.waitingMsgs += len(p.Bodies)
			if !p.Deadline.IsZero() {
				w.deadlined++
			}
		}
	}
	return out
}

// SetDedupe applies a partition's dedupe setting. It reports whether the
// window must be built from the log: it was off.
func (w *Writer) SetDedupe(cfg DedupeConfig) (rebuild bool) {
	if cfg.Window <= 0 {
		if w.dedupe != nil {
			w.dropDedupe()
		}
		return false
	}
	if w.dedupe == nil {
		w.dedupe = NewDedupe(cfg)
		return true
	}
	// A longer window remembers from now on; a leader's rebuild (the
	// next leader change) covers it all.
	w.dedupe.SetWindow(cfg.Window)
	return false
}

// dropDedupe turns dedupe off: parked publishes are queued as they are.
func (w *Writer) dropDedupe() {
	for _, p := range w.parked {
		p.owned = nil
		w.waiting = append(w.waiting, p)
		w.waitingMsgs += len(p.Bodies)
		if !p.Deadline.IsZero() {
			w.deadlined++
		}
	}
	for i := range w.waiting {
		w.waiting[i].owned = nil
	}
	for _, wr := range w.inflight {
		wr.ids = nil
	}
	w.parked, w.dedupe = nil, nil
}

// Dedupe is the partition's dedupe window, nil when off.
func (w *Writer) Dedupe() *Dedupe { return w.dedupe }
