package topic

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/storage"
)

// Messages a partition actor receives. Named for what happened.

// Published: a client published messages to this partition. Reply is called
// exactly once, on the partition actor's goroutine, and must not block.
type Published struct {
	Bodies    [][]byte
	DeliverAt int64 // unix nanos; 0 = at once
	Reply     func(Reply)
	Traces    []uint64     // PUB_TRACE's trace IDs, one per body
	Headers   [][]byte     // PUB_EXT's JSON headers, one per body
	IDs       []string     // the headers' ##msg_id, "" for none; nil when none has one
	Delayed   *DelayedCopy // a channel's long-delayed REQ
	// Deadline, when set, is when the publish stops being written
	// (Publish.Deadline): a forwarded publish's.
	Deadline time.Time
	// SeenEpoch, when set, is the epoch of the partition state its
	// forwarder chose this leader from (Publish.SeenEpoch).
	SeenEpoch int64
	// Here, when set, lets the sender run the partition's turn for this
	// publish on its own goroutine (dispatch.Here).
	Here *dispatch.Here
}

func (p *Published) RunsHere() *dispatch.Here { return p.Here }

// ChannelWanted asks for a channel's actor, creating the channel if needed;
// the answer is a *ChannelReady.
type ChannelWanted struct{ Name string }

// ChannelReady answers ChannelWanted.
type ChannelReady struct{ PID *actor.PID }

// ChannelDeleted: the channel is gone; its state and actor are removed.
type ChannelDeleted struct{ Name string }

// PauseChanged: the topic was paused or unpaused. A paused topic commits
// writes but channels see nothing new until it is unpaused.
type PauseChanged struct{ Paused bool }

// SettingsChanged: the topic's per-topic settings changed (youzan's
// /topic/meta/update). Both are the values to apply, the node's flags
// already put in where the topic sets none: SyncEvery is commits between
// fsyncs (0 = storage's default), Retention what confirmed data may go.
type SettingsChanged struct {
	SyncEvery int
	Retention storage.RetentionPolicy
	Dedupe    DedupeConfig
}

// Emptied: the topic was emptied: what no channel has read yet is skipped.
type Emptied struct{}

// StatsRequested asks for a *Stats reply.
type StatsRequested struct{}

// Stats answers StatsRequested.
type Stats struct {
	Topic        string
	Partition    int32
	End          int64 // committed end offset of the log
	Committed    int64 // messages committed since the partition began: the count at End
	Records      int64 // commit records
	MessageCount int64
	MessageBytes int64
	Depth        int64 // messages waiting for a first channel
	Paused       bool
	Writable     bool     // takes writes now: leads, enabled, no ISR change under way
	InFlight     int      // writes written locally and not yet committed
	Waiting      int      // published messages queued for a write
	Leader       bool     // this node leads the partition
	LastLogID    int64    // of the last committed record; 0 when empty
	LastEpoch    int64    // of the last committed record; 0 when empty
	ISR          int      // in-sync replicas, this node included when it leads
	Replicas     int      // configured replica count
	Catchup      int      // replicas catching up to rejoin the ISR
	Followers    []string // when leading: ISR followers and replicas catching up
	Syncs        int64    // fsyncs of the partition's files since it opened
	Dir          string   // the partition's directory, for its disk usage
	Disabled     bool     // this node leads and its writes are disabled (not just held)
	SyncEvery    int      // commits between fsyncs, as applied
	Retention    storage.RetentionPolicy
	// DedupeWindow is the dedupe window applied; DedupeEntries the IDs it
	// remembers (0 unless leading), DedupeHits the duplicates answered
	// without a write since the partition opened here.
	DedupeWindow  time.Duration
	DedupeEntries int
	DedupeHits    int64
	// ChannelActors are asked for their own snapshots by whoever gathers
	// stats, so the partition actor never waits on its channels.
	ChannelActors []*actor.PID
	Channels      []channel.Snapshot
}

type flushWrites struct{}
