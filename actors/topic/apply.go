package topic

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// The follower's side of replication: a leader's writes and channel
// offsets are applied here, through the Follower core (follow.go), and
// answered.

// ReplicaWriteArrived: a leader's write reached this follower. Reply is
// called exactly once with the ack.
type ReplicaWriteArrived struct {
	Write *messages.ReplicaWrite
	Reply func(*messages.ReplicaAck)
}

// ReplicaWritesArrived: a leader's frame of consecutive writes reached this
// follower. Reply is called exactly once with the frame's acks in log
// order: one naming the last write of each run applied, covering the writes
// before it, and a refusal for each write not applied.
type ReplicaWritesArrived struct {
	Writes []*messages.ReplicaWrite
	Reply  func([]*messages.ReplicaAck)
	// Here, when set, lets the session's reader run the partition's turn
	// for this frame on its own goroutine (dispatch.Here).
	Here *dispatch.Here
}

func (m *ReplicaWritesArrived) RunsHere() *dispatch.Here { return m.Here }

// applyReplicated is the follower side of the write flow for a frame of
// one write.
func (a *Actor) applyReplicated(ctx actor.Context, m *ReplicaWriteArrived) {
	m.Reply(a.applyFrame(ctx, []*messages.ReplicaWrite{m.Write})[0])
}

func (a *Actor) applyReplicatedFrame(ctx actor.Context, m *ReplicaWritesArrived) {
	if m.Here != nil {
		a.here = m.Here
	}
	m.Reply(a.applyFrame(ctx, m.Writes))
}

// applyFrame checks a frame's writes one by one, in order, as if each came
// alone, but appends each run of accepted writes with one write to the
// data log and one to the commit log: a run is written when a write breaks
// it (a refusal, a duplicate, a cut) and at the end of the frame.
func (a *Actor) applyFrame(ctx actor.Context, ws []*messages.ReplicaWrite) []*messages.ReplicaAck {
	acks := make([]*messages.ReplicaAck, len(ws))
	r := run{}
	for i, w := range ws {
		acks[i] = &messages.ReplicaAck{Topic: a.opt.Topic, Partition: a.opt.Partition, LogId: w.GetRecord().GetLogId()}
		d, ok := a.checkWrite(ctx, w, &r, acks)
		// After the check: a write may have brought a later epoch, and a
		// leader ignores a success in an epoch before its own.
		acks[i].EpochForWrite = a.ackEpoch()
		if ok {
			rec := recordFromProto(w.GetRecord())
			r.add(i, rec, w.GetMessages(), a.follower.Accepted(rec))
			continue
		}
		a.writeRun(ctx, &r, acks)
		a.answer(acks[i], w, d)
	}
	a.writeRun(ctx, &r, acks)
	return cumulative(acks)
}

// checkWrite runs the follower core's checks on w and performs a cut it
// decides, after writing the run before it. It reports whether w joins the
// run; otherwise d is its answer.
func (a *Actor) checkWrite(ctx actor.Context, w *messages.ReplicaWrite, r *run, acks []*messages.ReplicaAck) (d ApplyDecision, ok bool) {
	switch {
	case a.follower == nil && w.GetEpochForWrite() > a.role.EpochForWrite:
		// A leader elected since: this node has not heard yet that it no
		// longer leads (a moved leadership reaches the two nodes' watches
		// in either order). Like any epoch a follower has not heard of,
		// the new leader sends the write again shortly, rather than
		// failing it and, with no other follower, the partition's writes.
		return ApplyDecision{Err: ErrEpochMismatch, Kind: KindTemporary}, false
	case a.follower == nil:
		return ApplyDecision{Err: &Error{Code: ErrNotLeader.Code, Text: "replica write to the partition leader"}, Kind: KindCluster}, false
	case w.GetEmptyLog():
		d = a.follower.CheckEmpty(w.GetEpochForWrite())
	case w.GetRecord() == nil:
		return ApplyDecision{Err: &Error{Code: ErrPubArg.Code, Text: "replica write without a record"}, Kind: KindFollower}, false
	default:
		rec := recordFromProto(w.GetRecord())
		prev := RecordRef{LogID: w.GetPrev().GetLogId(), Epoch: w.GetPrev().GetEpoch()}
		d = a.follower.Check(ReplicaWriteIn{EpochForWrite: w.GetEpochForWrite(), Record: rec, Prev: prev, Data: w.GetMessages(), FullSync: w.GetFullSync()})
	}
	if d.Truncate != nil {
		a.writeRun(ctx, r, acks)
		if err := a.cutDiverged(ctx, *d.Truncate); err != nil {
			return ApplyDecision{Err: localError(err), Kind: KindLocal, LeaveISR: true}, false
		}
	}
	return d, d.Append
}

// ackEpoch is the epoch this replica answers a leader in: as a follower,
// the one its core accepts, which a leader may have brought before the
// metadata did (epochGate).
func (a *Actor) ackEpoch() int64 {
	if a.follower != nil {
		return a.follower.Epoch()
	}
	return a.role.EpochForWrite
}

// answer fills a write's ack with the decision on it.
func (a *Actor) answer(ack *messages.ReplicaAck, w *messages.ReplicaWrite, d ApplyDecision) {
	if d.Err == nil {
		return
	}
	ack.Kind, ack.Code, ack.Text = kindToProto(d.Kind), d.Err.Code, d.Err.Text
	if d.Err == ErrMissingPrev {
		ack.Behind, ack.FollowerRecords = true, a.recordSample()
		ack.FollowerEnd, _ = a.opt.Store.Committed()
	}
	if d.LeaveISR {
		a.opt.Logger.Warn("refused a leader write", "topic", a.opt.Topic, "partition", a.opt.Partition, "log_id", w.GetRecord().GetLogId(), "err", d.Err.Text)
	}
}

// run is the accepted writes of a frame not written yet: their records,
// their messages back to back, the acks they answer and where the
// follower's position was before the first.
type run struct {
	at    []int
	recs  []storage.CommitRecord
	data  [][]byte
	start Position
}

func (r *run) add(i int, rec storage.CommitRecord, data []byte, before Position) {
	if len(r.at) == 0 {
		r.start = before
	}
	r.at = append(r.at, i)
	r.recs = append(r.recs, rec)
	r.data = append(r.data, data)
}

// bytes is the run's messages as one buffer, copied only when there are
// several.
func (r *run) bytes() []byte {
	if len(r.data) == 1 {
		return r.data[0]
	}
	var n int
	for _, d := range r.data {
		n += len(d)
	}
	b := make([]byte, 0, n)
	for _, d := range r.data {
		b = append(b, d...)
	}
	return b
}

// writeRun appends and commits the run, and on failure refuses every write
// in it and puts the follower core back where the run started.
func (a *Actor) writeRun(ctx actor.Context, r *run, acks []*messages.ReplicaAck) {
	if len(r.at) == 0 {
		return
	}
	defer func() { *r = run{} }()
	if err := a.appendCommitted(r.recs, r.bytes()); err != nil {
		d := a.follower.RunFailed(r.start, err)
		a.opt.Logger.Warn("could not write a leader's records", "topic", a.opt.Topic, "partition", a.opt.Partition,
			"log_id", r.recs[0].LogID, "records", len(r.recs), "err", d.Err.Text)
		for _, i := range r.at {
			acks[i].Kind, acks[i].Code, acks[i].Text = kindToProto(d.Kind), d.Err.Code, d.Err.Text
		}
		return
	}
	a.announce(ctx)
}

// cumulative drops each success ack that another success ack right after
// it covers: the leader reads an ack as covering every write before it.
func cumulative(acks []*messages.ReplicaAck) []*messages.ReplicaAck {
	out := acks[:0]
	for i, ack := range acks {
		if ack.GetCode() == "" && i+1 < len(acks) && acks[i+1].GetCode() == "" {
			continue
		}
		out = append(out, ack)
	}
	return out
}

// appendCommitted appends a run of a leader's records with one write to the
// data log and commits them with one write to the commit log; on failure
// neither file keeps any of them.
func (a *Actor) appendCommitted(recs []storage.CommitRecord, data []byte) error {
	off, err := a.opt.Store.Log.Append(data)
	if err == nil && off != recs[0].MsgOffset {
		err = ErrOffsetMismatch
	}
	if err == nil {
		err = a.opt.Store.CommitAll(recs)
	}
	if err != nil {
		end, _ := a.opt.Store.Committed()
		_ = a.opt.Store.Log.Truncate(end)
		return err
	}
	for _, rec := range recs {
		a.pubMessages += int64(rec.MsgNum)
		a.pubBytes += int64(rec.MsgSize)
	}
	return nil
}

// OffsetArrived: a leader's channel offset reached this follower. Reply, if
// set, acknowledges it once applied.
type OffsetArrived struct {
	Update *messages.ChannelOffsetUpdate
	Reply  func(*messages.ReplicaAck)
}

// offsetArrived applies a leader's channel offset on this follower; a
// channel it does not have yet is created, and may move back.
func (a *Actor) offsetArrived(ctx actor.Context, m *OffsetArrived) {
	ack := &messages.ReplicaAck{Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: m.Update.GetChannel(), OffsetSyncId: m.Update.GetSyncId()}
	refuse := func(kind messages.ErrorKind, code, text string) {
		if m.Reply != nil {
			ack.Kind, ack.Code, ack.Text = kind, code, text
			m.Reply(ack)
		}
	}
	if a.leads() || IsEphemeral(m.Update.GetChannel()) {
		refuse(messages.ErrorKind_ERROR_KIND_CLUSTER, ErrNotLeader.Code, "channel offset sent to the leader or an ephemeral channel")
		return
	}
	if a.follower != nil && !a.follower.OffsetFrom(m.Update.GetEpochForWrite()) {
		refuse(messages.ErrorKind_ERROR_KIND_TEMPORARY, ErrEpochMismatch.Code, "channel offset of an earlier epoch than this replica's")
		return
	}
	_, existed := a.channels[m.Update.GetChannel()]
	pid := a.channel(ctx, m.Update.GetChannel())
	if pid == nil {
		refuse(messages.ErrorKind_ERROR_KIND_CLUSTER, ErrNotLeader.Code, "channel could not be opened")
		return
	}
	u := offsetUpdateFromProto(m.Update)
	u.AllowBackward = u.AllowBackward || !existed
	var reply func()
	if m.Reply != nil {
		reply = func() { m.Reply(ack) }
	}
	ctx.Send(pid, &channel.OffsetSynced{Update: u, Reply: reply})
}

// recordSample names this replica's last record and records at doubling
// distances before it, down to the first: enough for a leader to find the
// newest record they share in a few steps, whatever the length of the log.
func (a *Actor) recordSample() []*messages.RecordRef {
	return refsToProto(recordSample(storeLog{a.opt.Store}))
}

// recordSample is the sample of l a replica sends with a refusal for the
// record it lacks, newest first.
func recordSample(l LeaderLog) []RecordRef {
	var out []RecordRef
	n := l.Count()
	at := []int64{}
	for back := int64(1); back <= n; back *= 2 {
		at = append(at, n-back)
	}
	if len(at) > 0 && at[len(at)-1] != 0 {
		at = append(at, 0)
	}
	for _, i := range at {
		if r, err := l.Record(i); err == nil {
			out = append(out, Ref(r))
		}
	}
	return out
}

// cutDiverged cuts this follower's log back to the last record it shares
// with the leader. Channels that had moved past the cut move back with it;
// the leader's offsets set them right.
func (a *Actor) cutDiverged(ctx actor.Context, c Cut) error {
	before := a.opt.Store.Commits.Count()
	if c.Reset {
		if err := a.opt.Store.ResetAt(c.Pos.End); err != nil {
			return err
		}
		a.follower.Truncated(c)
		for _, pid := range a.channels {
			ctx.Send(pid, &channel.Reset{Start: c.Pos.End, Count: c.Pos.Count})
		}
		a.opt.Logger.Warn("full sync: the leader no longer has what this replica lacks; log restarted at the leader's",
			"topic", a.opt.Topic, "partition", a.opt.Partition, "records_dropped", before, "start", c.Pos.End)
		return nil
	}
	if err := a.opt.Store.Commits.TruncateTo(c.Records); err != nil {
		return err
	}
	if err := a.opt.Store.Log.Truncate(c.Pos.End); err != nil {
		return err
	}
	if err := a.opt.Store.Sync(); err != nil {
		return err
	}
	a.follower.Truncated(c)
	for _, pid := range a.channels {
		ctx.Send(pid, &channel.Truncated{End: c.Pos.End, Count: c.Pos.Count})
	}
	a.opt.Logger.Warn("cut a log that diverged from the leader's", "topic", a.opt.Topic, "partition", a.opt.Partition,
		"records_cut", before-c.Records, "end", c.Pos.End)
	return nil
}
