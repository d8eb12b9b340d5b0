package topic

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
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

// applyReplicated is the follower side of the write flow.
func (a *Actor) applyReplicated(ctx actor.Context, m *ReplicaWriteArrived) {
	w := m.Write
	ack := &messages.ReplicaAck{Topic: a.opt.Topic, Partition: a.opt.Partition, LogId: w.GetRecord().GetLogId(), EpochForWrite: a.role.EpochForWrite}
	if a.follower == nil {
		ack.Kind, ack.Code, ack.Text = messages.ErrorKind_ERROR_KIND_CLUSTER, ErrNotLeader.Code, "replica write to the partition leader"
		m.Reply(ack)
		return
	}
	if w.GetRecord() == nil {
		ack.Kind, ack.Code, ack.Text = messages.ErrorKind_ERROR_KIND_FOLLOWER, ErrPubArg.Code, "replica write without a record"
		m.Reply(ack)
		return
	}
	rec := recordFromProto(w.GetRecord())
	prev := RecordRef{LogID: w.GetPrev().GetLogId(), Epoch: w.GetPrev().GetEpoch()}
	d := a.follower.Check(ReplicaWriteIn{EpochForWrite: w.GetEpochForWrite(), Record: rec, Prev: prev, Data: w.GetMessages(), FullSync: w.GetFullSync()})
	if d.Truncate != nil {
		if err := a.cutDiverged(ctx, *d.Truncate); err != nil {
			d = ApplyDecision{Err: localError(err), Kind: KindLocal, LeaveISR: true}
		}
	}
	if d.Append {
		err := a.appendCommitted(rec, w.GetMessages())
		d = a.follower.Applied(rec, err)
		if err == nil {
			a.announce(ctx)
		}
	}
	if d.Err != nil {
		ack.Kind, ack.Code, ack.Text = kindToProto(d.Kind), d.Err.Code, d.Err.Text
		if d.Err == ErrMissingPrev {
			ack.Behind, ack.FollowerRecords = true, a.recordSample()
			ack.FollowerEnd, _ = a.opt.Store.Committed()
		}
		if d.LeaveISR {
			a.opt.Logger.Warn("refused a leader write", "topic", a.opt.Topic, "partition", a.opt.Partition, "log_id", rec.LogID, "err", d.Err.Text)
		}
	}
	m.Reply(ack)
}

// appendCommitted appends a follower's write and commits it at once.
func (a *Actor) appendCommitted(rec storage.CommitRecord, data []byte) error {
	off, err := a.opt.Store.Log.Append(data)
	if err == nil && off != rec.MsgOffset {
		err = ErrOffsetMismatch
	}
	if err == nil {
		err = a.opt.Store.Commit(rec)
	}
	if err != nil {
		end, _ := a.opt.Store.Committed()
		_ = a.opt.Store.Log.Truncate(end)
		return err
	}
	a.pubMessages += int64(rec.MsgNum)
	a.pubBytes += int64(rec.MsgSize)
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
	refuse := func(text string) {
		if m.Reply != nil {
			ack.Kind, ack.Code, ack.Text = messages.ErrorKind_ERROR_KIND_CLUSTER, ErrNotLeader.Code, text
			m.Reply(ack)
		}
	}
	if a.leads() || IsEphemeral(m.Update.GetChannel()) {
		refuse("channel offset sent to the leader or an ephemeral channel")
		return
	}
	_, existed := a.channels[m.Update.GetChannel()]
	pid := a.channel(ctx, m.Update.GetChannel())
	if pid == nil {
		refuse("channel could not be opened")
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
