package topic

import (
	"context"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// Role is this node's part in a partition, from the cluster's metadata.
type Role struct {
	Leader        string
	ISR           []string
	Catchup       []string // replicas catching up: sent every write, not waited for
	EpochForWrite int64
	Replicas      int
	// Revision is the metadata's revision of this state (0: unknown). The
	// actor applies the states its own changes returned at once, so an
	// older one the watch delivers later must not undo them.
	Revision int64
}

func (r Role) catchingUp(node string) bool { return slices.Contains(r.Catchup, node) }

func (r Role) followersOf(self string) []string {
	var out []string
	for _, n := range r.ISR {
		if n != self {
			out = append(out, n)
		}
	}
	return out
}

func (r Role) inISR(node string) bool {
	for _, n := range r.ISR {
		if n == node {
			return true
		}
	}
	return false
}

// RoleChanged: the partition's metadata changed.
type RoleChanged struct{ Role Role }

// ReplicaWriteArrived: a leader's write reached this follower. Reply is
// called exactly once with the ack.
type ReplicaWriteArrived struct {
	Write *messages.ReplicaWrite
	Reply func(*messages.ReplicaAck)
}

type isrShrunk struct {
	role Role
	err  error
}

// leads reports whether this node leads the partition.
func (a *Actor) leads() bool { return a.role.Leader == a.opt.Node }

// applyRole sets the write flow up for the role: a leader gets a Writer and
// a replica actor per ISR follower; a follower gets the apply core.
func (a *Actor) applyRole(ctx actor.Context, role Role) {
	if a.roleSet && role.Revision != 0 && role.Revision < a.role.Revision {
		return // stale: a newer state was applied already
	}
	wasLeader := a.roleSet && a.leads()
	a.roleSet = true
	a.role = role
	a.progress.SetRole(role.followersOf(a.opt.Node), role.Catchup)
	if !a.leads() {
		if wasLeader {
			a.stepDown(ctx)
		}
		a.stopReplicas(ctx, nil)
		a.follower = NewFollower(role.EpochForWrite, a.committedPosition(), a.recordByLogID)
		// A replica catching up applies the leader's writes too; it is
		// only not waited for.
		a.follower.SetISR(role.inISR(a.opt.Node) || role.catchingUp(a.opt.Node))
		return
	}
	a.follower = nil
	before := a.role.Catchup
	if !wasLeader {
		before = nil
	}
	defer func() {
		for _, n := range role.Catchup {
			if !slices.Contains(before, n) {
				a.probeCatchup(ctx, n)
			}
		}
	}()
	followers := role.followersOf(a.opt.Node)
	if !wasLeader {
		a.progress.Lead()
		a.writer = a.newWriter(role.EpochForWrite, followers, max(role.Replicas, 1))
		a.opt.Observer.BecameLeader(a.opt.Topic, a.opt.Partition)
	} else {
		a.perform(ctx, a.writer.SetFollowers(followers, role.EpochForWrite))
	}
	keep := make(map[string]bool, len(followers)+len(role.Catchup))
	for _, f := range append(append([]string(nil), followers...), role.Catchup...) {
		if f == a.opt.Node || keep[f] {
			continue
		}
		keep[f] = true
		if _, ok := a.replicas[f]; !ok && a.opt.Dial != nil {
			pid, err := ctx.SpawnNamed(a.instrument("replica", replica.Props(replica.Options{
				Topic: a.opt.Topic, Partition: a.opt.Partition, Node: f, Dial: a.opt.Dial, Logger: a.opt.Logger,
			})), "replica-"+f)
			if err != nil {
				a.opt.Logger.Error("starting replica actor", "follower", f, "err", err)
				continue
			}
			a.replicas[f] = pid
		}
	}
	a.stopReplicas(ctx, keep)
}

// stepDown ends this node's leadership. Its writes in flight were never
// committed: their publishers hear so at once (the new leader's log decides
// whether they survive, as with any failed write), the log drops what they
// appended, and a fresh writer means their acks and timeouts, arriving
// later, find nothing to commit or roll back in the log the node now takes
// from the new leader.
func (a *Actor) stepDown(ctx actor.Context) {
	if end, _ := a.opt.Store.Committed(); a.opt.Store.Log.End() > end {
		if err := a.opt.Store.Log.Truncate(end); err != nil {
			a.opt.Logger.Error("dropping uncommitted writes after losing leadership", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		}
	}
	a.perform(ctx, a.writer.Disable())
	for _, rep := range a.writer.Abandon(a.committedPosition(), ErrNotLeader).Replies {
		rep.Token.(func(Reply))(rep)
	}
	a.writer = a.newWriter(a.role.EpochForWrite, nil, max(a.role.Replicas, 1))
	a.writer.Disable()
	a.progress.StepDown()
}

// newWriter starts a write flow at the end of what is committed here.
func (a *Actor) newWriter(epoch int64, followers []string, replicas int) *Writer {
	cfg := a.opt.Writer
	cfg.Partition, cfg.Epoch, cfg.Followers, cfg.Replicas = a.opt.Partition, epoch, followers, replicas
	return NewWriter(cfg, a.committedPosition())
}

func (a *Actor) stopReplicas(ctx actor.Context, keep map[string]bool) {
	for n, pid := range a.replicas {
		if !keep[n] {
			ctx.Stop(pid)
			delete(a.replicas, n)
		}
	}
}

func (a *Actor) committedPosition() Position { return committedPosition(a.opt.Store, a.opt.Partition) }

func committedPosition(store *storage.Partition, partition int32) Position {
	end, count := store.Committed()
	pos := Position{NextID: FirstID(partition), End: end, Count: count}
	if last, ok := store.Commits.Last(); ok {
		pos.NextID, pos.Last = uint64(last.LastMsgLogID)+1, Ref(last)
	}
	return pos
}

// recordByLogID finds a committed record by its LogID.
func (a *Actor) recordByLogID(id int64) (storage.CommitRecord, int64, bool) {
	return findByLogID(storeLog{a.opt.Store}, id)
}

// sendToReplicas hands a locally written record to every follower's replica
// actor at once, and to replicas catching up; the partition actor goes on
// with the next publish.
func (a *Actor) sendToReplicas(ctx actor.Context, sends []ReplicaSend) {
	var pb *messages.ReplicaWrite
	var last *Write
	for _, s := range sends {
		if s.Write != last {
			last = s.Write
			pb = a.replicaWrite(s.Write.Record.Epoch, s.Write.Record, s.Write.Prev, s.Write.Data)
			a.sendToCatchup(ctx, pb)
		}
		pid, ok := a.replicas[s.Node]
		if !ok {
			a.perform(ctx, a.writer.FollowerDown(s.Node))
			continue
		}
		ctx.Send(pid, &replica.Replicate{Write: pb})
	}
}

// sendToCatchup gives replicas that are catching up every new write too,
// so they can join the ISR once they have acknowledged one. A replica that
// is being pushed the log gets the new writes from the push instead: sent
// now, they would land behind records it does not have yet and each be
// refused.
func (a *Actor) sendToCatchup(ctx actor.Context, pb *messages.ReplicaWrite) {
	for _, n := range a.role.Catchup {
		if a.progress.Push(n) != nil {
			continue
		}
		if pid, ok := a.replicas[n]; ok && !slices.Contains(a.writer.Followers(), n) {
			ctx.Send(pid, &replica.Replicate{Write: pb})
		}
	}
}

// replicaWrite is a record and its messages as a follower receives them.
func (a *Actor) replicaWrite(epochForWrite int64, rec storage.CommitRecord, prev RecordRef, data []byte) *messages.ReplicaWrite {
	w := &messages.ReplicaWrite{
		Topic: a.opt.Topic, Partition: a.opt.Partition, EpochForWrite: epochForWrite,
		Record: recordToProto(rec), Messages: data,
	}
	if prev != (RecordRef{}) {
		w.Prev = &messages.RecordRef{LogId: prev.LogID, Epoch: prev.Epoch}
	}
	return w
}

// shrinkISR asks the metadata to drop followers, off the actor's goroutine.
func (a *Actor) shrinkISR(ctx actor.Context, remove []string) {
	if a.opt.ShrinkISR == nil {
		ctx.Send(ctx.Self(), &isrShrunk{err: errNoMetadata})
		return
	}
	self, root, shrink := ctx.Self(), ctx.ActorSystem().Root, a.opt.ShrinkISR
	go func() {
		c, cancel := context.WithTimeout(context.Background(), metadataTimeout)
		defer cancel()
		role, err := shrink(c, remove)
		root.Send(self, &isrShrunk{role: role, err: err})
	}()
}

type topicError string

func (e topicError) Error() string { return string(e) }

const errNoMetadata = topicError("no partition metadata to change")

func (a *Actor) shrunk(ctx actor.Context, m *isrShrunk) {
	if m.err != nil {
		a.opt.Logger.Warn("shrinking ISR", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", m.err)
		a.perform(ctx, a.writer.ISRShrunk(m.err))
		return
	}
	a.opt.Observer.ISRShrunk(a.opt.Topic, a.opt.Partition, len(a.role.ISR)-len(m.role.ISR))
	if m.role.Revision >= a.role.Revision {
		a.role = m.role // what the watch will bring: older states must not undo it
		a.progress.SetRole(a.role.followersOf(a.opt.Node), a.role.Catchup)
	}
	a.perform(ctx, a.writer.ISRShrunk(nil))
	keep := map[string]bool{}
	for _, f := range a.writer.Followers() {
		keep[f] = true
	}
	for n := range a.replicas {
		if !keep[n] {
			a.syncsWithout(ctx, n, false)
		}
	}
	// Removed followers are catching up now: their replica actors stay.
	a.opt.Logger.Info("ISR shrunk", "topic", a.opt.Topic, "partition", a.opt.Partition, "isr", m.role.ISR)
}

func (a *Actor) replicaAcked(ctx actor.Context, m *replica.Acked) {
	a.observeAck(m)
	if m.Ack.GetOffsetSyncId() != 0 {
		a.offsetAcked(ctx, m.Node, m.Ack)
		return
	}
	kind := m.Ack.GetKind()
	in := AckIn{
		Node:     m.Node,
		LogID:    m.LogID,
		Behind:   m.Ack.GetBehind(),
		Refused:  kind != messages.ErrorKind_ERROR_KIND_NONE,
		OldEpoch: kind == messages.ErrorKind_ERROR_KIND_TEMPORARY && m.Ack.GetEpochForWrite() < a.writer.Epoch(),
		InSync:   slices.Contains(a.writer.Followers(), m.Node),
	}
	if !in.InSync && !in.Refused && !in.Behind {
		in.Current = a.current(m.LogID)
	}
	s := a.progress.Acked(in, a.opt.Now())
	if s.CatchUp {
		a.catchUp(ctx, m.Node, m.Ack.GetFollowerRecords())
	}
	if s.PushMore {
		a.pushChunk(ctx, m.Node)
	}
	if s.Writer {
		var err error
		if in.Refused {
			err = &Error{Code: m.Ack.GetCode(), Text: m.Ack.GetText()}
		}
		a.perform(ctx, a.writer.Acked(m.Node, m.LogID, err))
	}
	if s.Hold {
		a.writer.Hold()
	}
	if s.Join {
		a.continueJoin(ctx)
	}
}

// current reports whether logID is the last committed record or a write in
// flight: a replica that applied it has all this leader has.
func (a *Actor) current(logID int64) bool {
	if logID == a.lastLogID() {
		return true
	}
	for _, w := range a.writer.InFlightWrites() {
		if w.Record.LogID == logID {
			return true
		}
	}
	return false
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

func kindToProto(k ErrorKind) messages.ErrorKind {
	switch k {
	case KindLocal:
		return messages.ErrorKind_ERROR_KIND_LOCAL
	case KindFollower:
		return messages.ErrorKind_ERROR_KIND_FOLLOWER
	case KindTemporary:
		return messages.ErrorKind_ERROR_KIND_TEMPORARY
	case KindCluster:
		return messages.ErrorKind_ERROR_KIND_CLUSTER
	}
	return messages.ErrorKind_ERROR_KIND_NONE
}

func recordToProto(r storage.CommitRecord) *messages.CommitRecord {
	return &messages.CommitRecord{LogId: r.LogID, Epoch: r.Epoch, LastMsgLogId: r.LastMsgLogID, MsgOffset: r.MsgOffset, MsgSize: r.MsgSize, MsgCnt: r.MsgCnt, MsgNum: r.MsgNum}
}

func recordFromProto(r *messages.CommitRecord) storage.CommitRecord {
	return storage.CommitRecord{LogID: r.GetLogId(), Epoch: r.GetEpoch(), LastMsgLogID: r.GetLastMsgLogId(), MsgOffset: r.GetMsgOffset(), MsgSize: r.GetMsgSize(), MsgCnt: r.GetMsgCnt(), MsgNum: r.GetMsgNum()}
}

// OffsetArrived: a leader's channel offset reached this follower. Reply, if
// set, acknowledges it once applied.
type OffsetArrived struct {
	Update *messages.ChannelOffsetUpdate
	Reply  func(*messages.ReplicaAck)
}

// replicateOffset sends a leader channel's confirmed offset to every
// follower, fire-and-forget.
func (a *Actor) replicateOffset(ctx actor.Context, m *channel.ConfirmedMoved) {
	if !a.leads() || len(a.replicas) == 0 {
		return
	}
	u := &messages.ChannelOffsetUpdate{
		Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: m.Channel,
		VOffset: m.Update.Offset, VCnt: m.Update.Count, Flush: m.Update.Flush,
		AllowBackward: m.Update.AllowBackward, NeedUpdateConfirmed: m.Update.ReplaceIntervals,
	}
	for _, iv := range m.Update.Intervals {
		u.ConfirmedIntervals = append(u.ConfirmedIntervals, &messages.Interval{Start: iv.Start, End: iv.End, Count: iv.Count})
	}
	for _, pid := range a.replicas {
		ctx.Send(pid, &replica.ReplicateOffset{Update: u})
	}
}

// resendOffsets has every channel report its whole confirmed state again:
// offsets are sent fire-and-forget and only when they change, so a follower
// that was unreachable, or had not opened the partition yet, gets them here.
func (a *Actor) resendOffsets(ctx actor.Context) {
	if !a.leads() {
		return
	}
	for _, pid := range a.channels {
		ctx.Send(pid, &channel.FollowerConnected{})
	}
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
	u := channel.OffsetUpdate{
		Offset: m.Update.GetVOffset(), Count: m.Update.GetVCnt(), Flush: m.Update.GetFlush(),
		AllowBackward: m.Update.GetAllowBackward() || !existed, ReplaceIntervals: m.Update.GetNeedUpdateConfirmed(),
	}
	for _, iv := range m.Update.GetConfirmedIntervals() {
		u.Intervals = append(u.Intervals, storage.Interval{Start: iv.GetStart(), End: iv.GetEnd(), Count: iv.GetCount()})
	}
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
	var out []*messages.RecordRef
	for _, r := range recordSample(storeLog{a.opt.Store}) {
		out = append(out, &messages.RecordRef{LogId: r.LogID, Epoch: r.Epoch})
	}
	return out
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
