package topic

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
)

// Catch-up is leader-driven: a follower that lacks the record a write
// follows refuses it with a sample of its log; the leader finds the newest
// record they share and pushes what follows, then the writes still in
// flight, in order. This brings back a follower that fell behind (after a
// failover, or a write it missed while its stream was reconnecting) and one
// that holds records this log does not (a deposed leader's uncommitted
// writes), which it cuts on the way. The push goes a chunk at a time, the
// next once the follower acknowledged the last, so a replica that needs a
// whole log never has it all queued at once.

// Chunks of a catch-up push, in records and bytes.
const (
	catchupChunkRecords = 256
	catchupChunkBytes   = 4 << 20
)

// push is where a follower's catch-up stands.
type push struct {
	next     int64     // index of the next record to send
	prev     RecordRef // the record before it
	fullSync bool      // the next record starts the follower's log afresh
	awaited  int64     // LogID of the last record sent: its ack sends more
	sent     int
}

// catchUp starts pushing a follower what follows the newest record of have
// (its sample, newest first) that this log holds too.
func (a *Actor) catchUp(ctx actor.Context, node string, have []*messages.RecordRef) {
	if _, ok := a.replicas[node]; !ok || !a.leads() {
		return
	}
	from := int64(0) // index of the first record to send
	for _, r := range have {
		if rec, i, ok := a.recordByLogID(r.GetLogId()); ok && rec.Epoch == r.GetEpoch() {
			from = i + 1
			break
		}
	}
	if !a.progress.CatchUp(node, from) {
		return // already sent from there; the refusals of the writes after it say the same
	}
	commits := a.opt.Store.Commits
	p := &push{next: from}
	for start := a.opt.Store.Log.Start(); p.next < commits.Count(); p.next++ {
		// Retention deleted the data of the first records: the follower
		// starts afresh from the first record still here.
		rec, err := commits.Record(p.next)
		if err != nil || rec.MsgOffset >= start {
			break
		}
		p.fullSync = true
	}
	if p.next > 0 {
		r, err := commits.Record(p.next - 1)
		if err != nil {
			return
		}
		p.prev = Ref(r)
	}
	a.progress.BeginPush(node, p)
	a.opt.Logger.Info("catching a follower up", "topic", a.opt.Topic, "partition", a.opt.Partition, "follower", node, "from_record", p.next)
	a.pushChunk(ctx, node)
}

// pushChunk sends a follower the next chunk of its catch-up; after the last
// committed record it sends the writes in flight and the push is over.
func (a *Actor) pushChunk(ctx actor.Context, node string) {
	p := a.progress.Push(node)
	pid, up := a.replicas[node]
	if p == nil || !up || !a.leads() {
		a.progress.PushDone(node)
		return
	}
	commits := a.opt.Store.Commits
	records, bytes := 0, 0
	for ; p.next < commits.Count() && records < catchupChunkRecords && bytes < catchupChunkBytes; p.next++ {
		rec, err := commits.Record(p.next)
		if err != nil {
			break
		}
		data := make([]byte, rec.MsgSize)
		if _, err := a.opt.Store.Log.ReadAt(data, rec.MsgOffset); err != nil {
			a.opt.Logger.Error("reading a record for catch-up", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
			a.progress.PushDone(node)
			return
		}
		w := a.replicaWrite(a.writer.Epoch(), rec, p.prev, data)
		w.FullSync, p.fullSync = p.fullSync, false
		ctx.Send(pid, &replica.Replicate{Write: w})
		p.prev, p.awaited = Ref(rec), rec.LogID
		records++
		bytes += len(data)
	}
	p.sent += records
	if p.next < commits.Count() {
		return // the ack of p.awaited sends the next chunk
	}
	a.progress.PushDone(node)
	for _, w := range a.writer.InFlightWrites() {
		ctx.Send(pid, &replica.Replicate{Write: a.replicaWrite(a.writer.Epoch(), w.Record, w.Prev, w.Data)})
	}
	a.opt.Observer.CatchUpSent(a.opt.Topic, a.opt.Partition, node, p.sent)
}
