package topic

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/storage"
)

// Observer hears what a partition actor does, for metrics. Its methods run
// on the actor's goroutine, so they must be quick and must not block.
type Observer interface {
	// Committed: a record of msgs messages committed, latency after its
	// local write started.
	Committed(topic string, partition int32, msgs int, latency time.Duration)
	// ReplicaAcked: a follower acknowledged a write latency after its local
	// write started.
	ReplicaAcked(topic string, partition int32, follower string, latency time.Duration)
	ISRShrunk(topic string, partition int32, removed int)
	ISRExpanded(topic string, partition int32, node string)
	// BecameLeader: this node took the partition's leadership.
	BecameLeader(topic string, partition int32)
	// CatchUpSent: a follower that fell behind was sent a chunk of records
	// holding bytes of message data; reported chunk by chunk, so a long
	// catch-up shows its pace while it runs.
	CatchUpSent(topic string, partition int32, follower string, records, bytes int)
	// FrameSent: a replica actor sent a follower a frame of records. It
	// runs on the replica actor's goroutine.
	FrameSent(follower string, records int)
}

type nopObserver struct{}

func (nopObserver) Committed(string, int32, int, time.Duration)       {}
func (nopObserver) ReplicaAcked(string, int32, string, time.Duration) {}
func (nopObserver) ISRShrunk(string, int32, int)                      {}
func (nopObserver) ISRExpanded(string, int32, string)                 {}
func (nopObserver) BecameLeader(string, int32)                        {}
func (nopObserver) CatchUpSent(string, int32, string, int, int)       {}
func (nopObserver) FrameSent(string, int)                             {}

// writeStart is when a record's local write started, kept until it commits
// so commit and replica ack latencies can be measured outside the write core.
type writeStart struct {
	logID int64
	at    time.Time
}

func (a *Actor) writeStarted(w *Write) {
	a.starts = append(a.starts, writeStart{logID: w.Record.LogID, at: w.StartedAt})
}

// startOf finds a record still waiting to commit.
func (a *Actor) startOf(logID int64) (time.Time, bool) {
	for _, s := range a.starts {
		if s.logID == logID {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// observeCommit measures a committed record and forgets it and any older
// record (those failed: LogIDs are never reused).
func (a *Actor) observeCommit(rec storage.CommitRecord) {
	if at, ok := a.startOf(rec.LogID); ok {
		a.opt.Observer.Committed(a.opt.Topic, a.opt.Partition, int(rec.MsgNum), a.opt.Now().Sub(at))
	}
	i := 0
	for i < len(a.starts) && a.starts[i].logID <= rec.LogID {
		i++
	}
	a.starts = a.starts[i:]
}

// observeAck measures a follower's successful ack of a write in flight.
func (a *Actor) observeAck(m *replica.Acked) {
	if m.Ack.GetOffsetSyncId() != 0 || m.Ack.GetCode() != "" || m.Ack.GetBehind() {
		return
	}
	if at, ok := a.startOf(m.LogID); ok {
		a.opt.Observer.ReplicaAcked(a.opt.Topic, a.opt.Partition, m.Node, a.opt.Now().Sub(at))
	}
}

// instrument adds the configured props options (metrics middleware) to a
// child actor's props.
func (a *Actor) instrument(kind string, p *actor.Props) *actor.Props {
	if a.opt.ActorProps == nil {
		return p
	}
	return p.Configure(a.opt.ActorProps(kind)...)
}

// frameSent tells the observer of the frames a follower's replica actor
// sends; the observer's counters take calls from any goroutine.
func (a *Actor) frameSent(follower string) func(int) {
	obs := a.opt.Observer
	return func(n int) { obs.FrameSent(follower, n) }
}
