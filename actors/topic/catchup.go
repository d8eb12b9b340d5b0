package topic

import (
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
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
	chunk    int // records a chunk holds at most
}

// LeaderLog is what a catch-up reads of the leader's committed log: its
// commit records by index, and the data of the messages retention kept.
type LeaderLog interface {
	Count() int64
	Record(i int64) (storage.CommitRecord, error)
	Start() int64 // byte offset of the first message retention kept
	ReadAt(p []byte, off int64) (int, error)
}

// storeLog reads a partition's store as a LeaderLog.
type storeLog struct{ *storage.Partition }

func (s storeLog) Count() int64                                 { return s.Commits.Count() }
func (s storeLog) Record(i int64) (storage.CommitRecord, error) { return s.Commits.Record(i) }
func (s storeLog) Start() int64                                 { return s.Log.Start() }
func (s storeLog) ReadAt(p []byte, off int64) (int, error)      { return s.Log.ReadAt(p, off) }

// findByLogID finds a committed record by its LogID: every log is one
// leader's log or a prefix of it followed by another's, so LogIDs increase.
func findByLogID(l LeaderLog, id int64) (storage.CommitRecord, int64, bool) {
	n := l.Count()
	i := sort.Search(int(n), func(i int) bool {
		r, err := l.Record(int64(i))
		return err != nil || r.LogID >= id
	})
	if int64(i) >= n {
		return storage.CommitRecord{}, 0, false
	}
	r, err := l.Record(int64(i))
	return r, int64(i), err == nil && r.LogID == id
}

// sharedFrom is the index of the first record a follower lacks: the one
// after the newest record of have (its sample, newest first) that l holds
// too, or the first when they share none.
func sharedFrom(l LeaderLog, have []RecordRef) int64 {
	for _, r := range have {
		if rec, i, ok := findByLogID(l, r.LogID); ok && rec.Epoch == r.Epoch {
			return i + 1
		}
	}
	return 0
}

// newPush starts a push at index from. Where retention deleted the data of
// the first records, the follower starts afresh from the first record still
// here.
func newPush(l LeaderLog, from int64) (*push, bool) {
	p := &push{next: from, chunk: catchupChunkRecords}
	for start := l.Start(); p.next < l.Count(); p.next++ {
		rec, err := l.Record(p.next)
		if err != nil || rec.MsgOffset >= start {
			break
		}
		p.fullSync = true
	}
	if p.next > 0 {
		r, err := l.Record(p.next - 1)
		if err != nil {
			return nil, false
		}
		p.prev = Ref(r)
	}
	return p, true
}

// pushWrite is one record of a push as the follower is sent it.
type pushWrite struct {
	Record   storage.CommitRecord
	Prev     RecordRef
	Data     []byte
	FullSync bool
}

// nextChunk takes the push's next chunk of records. done: it reached the end of
// the committed log, and the writes in flight follow. An error reading a
// record's data ends the push after the records before it.
func (p *push) nextChunk(l LeaderLog) (out []pushWrite, done bool, err error) {
	bytes := 0
	for ; p.next < l.Count() && len(out) < p.chunk && bytes < catchupChunkBytes; p.next++ {
		rec, rerr := l.Record(p.next)
		if rerr != nil {
			break
		}
		data := make([]byte, rec.MsgSize)
		if _, err := l.ReadAt(data, rec.MsgOffset); err != nil {
			return out, false, err
		}
		out = append(out, pushWrite{Record: rec, Prev: p.prev, Data: data, FullSync: p.fullSync})
		p.fullSync = false
		p.prev, p.awaited = Ref(rec), rec.LogID
		bytes += len(data)
	}
	p.sent += len(out)
	return out, p.next >= l.Count(), nil
}

// probeWrite is the last committed record with the one before it: a
// follower acknowledges it if it has everything, or refuses it for the
// record it lacks.
func probeWrite(l LeaderLog) (pushWrite, bool) {
	n := l.Count()
	if n == 0 {
		return pushWrite{}, false
	}
	last, err := l.Record(n - 1)
	if err != nil {
		return pushWrite{}, false
	}
	w := pushWrite{Record: last, Data: make([]byte, last.MsgSize)}
	if n > 1 {
		if r, err := l.Record(n - 2); err == nil {
			w.Prev = Ref(r)
		}
	}
	if _, err := l.ReadAt(w.Data, last.MsgOffset); err != nil {
		return pushWrite{}, false
	}
	return w, true
}

// catchUp starts pushing a follower what follows the newest record of have
// (its sample, newest first) that this log holds too.
func (a *Actor) catchUp(ctx actor.Context, node string, have []*messages.RecordRef) {
	if _, ok := a.replicas[node]; !ok || !a.leads() {
		return
	}
	log := storeLog{a.opt.Store}
	from := sharedFrom(log, refsFromProto(have))
	if !a.progress.CatchUp(node, from) {
		return // already sent from there; the refusals of the writes after it say the same
	}
	p, ok := newPush(log, from)
	if !ok {
		return
	}
	a.progress.BeginPush(node, p)
	delete(a.pushesPaused, node) // the new push starts now, or pauses anew
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
	now := a.opt.Now()
	if wait := a.opt.CatchupLimit.wait(now); wait > 0 {
		a.pausePush(node, now.Add(wait))
		return
	}
	ws, done, err := p.nextChunk(storeLog{a.opt.Store})
	sent := 0
	for _, pw := range ws {
		w := a.replicaWrite(a.writer.Epoch(), pw.Record, pw.Prev, pw.Data)
		w.FullSync = pw.FullSync
		ctx.Send(pid, &replica.Replicate{Write: w})
		sent += len(pw.Data)
	}
	a.opt.CatchupLimit.take(now, sent)
	if len(ws) > 0 {
		a.opt.Observer.CatchUpSent(a.opt.Topic, a.opt.Partition, node, len(ws), sent)
	}
	if err != nil {
		a.opt.Logger.Error("reading a record for catch-up", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		a.progress.PushDone(node)
		return
	}
	if !done {
		return // the ack of p.awaited sends the next chunk
	}
	a.progress.PushDone(node)
	for _, w := range a.writer.InFlightWrites() {
		ctx.Send(pid, &replica.Replicate{Write: a.replicaWrite(a.writer.Epoch(), w.Record, w.Prev, w.Data)})
	}
}

// pausePush holds a follower's push until the node's catch-up rate allows
// its next chunk: the chunk is read only then, so a paused push holds no
// data.
func (a *Actor) pausePush(node string, until time.Time) {
	if a.pushesPaused == nil {
		a.pushesPaused = map[string]time.Time{}
	}
	a.pushesPaused[node] = until
}

// pushesDeadline is when the first paused push may go on.
func (a *Actor) pushesDeadline() time.Time {
	var due time.Time
	for _, at := range a.pushesPaused {
		due = earliest(due, at)
	}
	return due
}

// resumePushes sends the next chunk of every paused push whose time came.
func (a *Actor) resumePushes(ctx actor.Context, now time.Time) {
	for node, at := range a.pushesPaused {
		if !at.After(now) {
			delete(a.pushesPaused, node)
			a.pushChunk(ctx, node)
		}
	}
}
