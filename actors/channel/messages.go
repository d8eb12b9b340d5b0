package channel

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/dispatch"
)

// Messages a channel actor receives. Named for what happened.

// Subscribed: a consumer joined the channel.
type Subscribed struct{ Consumer *Consumer }

// Unsubscribed: a consumer's connection ended. Its in-flight messages stay
// in flight until they time out, as in nsqd.
type Unsubscribed struct{ ConsumerID int64 }

// WindowOpened: a consumer has room for more messages.
type WindowOpened struct{}

// Committed: the partition committed its log up to End (Count messages).
// Here, when set, is the Here of the publish behind the commit: an idle
// channel's turn then runs on that publisher's goroutine too.
type Committed struct {
	End, Count int64
	Here       *dispatch.Here
}

func (c *Committed) RunsHere() *dispatch.Here { return c.Here }

// Reset: this follower's log restarted at Start (a full sync from a leader
// that deleted what came before); nothing before or after it exists.
type Reset struct{ Start, Count int64 }

// Truncated: this follower cut a log that diverged from the leader's back to
// End; nothing past it exists any more.
type Truncated struct{ End, Count int64 }

// Finished, Requeued and Touched are a consumer's FIN, REQ and TOUCH. Out,
// when set, is the consumer's connection: it hears the refusal when the
// consumer is no longer attached here (its subscription left this
// partition as the command came), as nsqd answers every FIN, REQ or
// TOUCH it cannot apply. A consumer that hears nothing takes its FIN as
// done.
type Finished struct {
	ConsumerID int64
	ID         uint64
	Out        Outbox
}

type Requeued struct {
	ConsumerID int64
	ID         uint64
	Delay      time.Duration
	Out        Outbox
}

type Touched struct {
	ConsumerID int64
	ID         uint64
	Out        Outbox
}

// PauseChanged: the channel was paused or unpaused.
type PauseChanged struct{ Paused bool }

// SkipChanged: the channel was skipped or unskipped.
type SkipChanged struct{ Skipped bool }

// RateLimitChanged: the channel's delivery rate limit was set, in
// kilobytes a second; 0 lifts it.
type RateLimitChanged struct{ KB int64 }

// ClientLimitsChanged: the channel's caps on its consumers' RDY by client
// prefix are now Limits.
type ClientLimitsChanged struct{ Limits []ClientLimit }

// FinishAsked: an operator finishes a message by its ID, whoever holds it
// (youzan's /message/finish). Reply gets ErrNotInFlight when the message
// is neither in flight nor waiting for its next delivery.
type FinishAsked struct {
	ID    uint64
	Reply func(error)
}

// DeferredEmptyAsked: an operator drops the channel's deferred messages
// (youzan's /channel/emptydelayed). Reply gets how many.
type DeferredEmptyAsked struct{ Reply func(int) }

// DeferredDueAsked: an operator makes the deferred messages due by Until
// (unix nanos) due now (youzan's /channel/requeuedelayed). Reply gets how
// many.
type DeferredDueAsked struct {
	Until int64
	Reply func(int)
}

// Emptied: an operator emptied the channel.
type Emptied struct{}

// StatsRequested asks for a Snapshot in reply.
type StatsRequested struct{}

// Snapshot answers StatsRequested.
type Snapshot struct {
	Name      string
	Stats     Stats
	Consumers []int64
	// Limited counts the consumers whose RDY a client limit caps.
	Limited int
	// Oldest is the timestamp (unix nanos) of the oldest message not yet
	// finished, 0 when every committed message is.
	Oldest int64
	// E2E is the end-to-end processing latency over its window; nil
	// unless the channel tracks it.
	E2E *E2ESummary
}

// Deleted: the channel was deleted; its consumers are told and it stops.
type Deleted struct{}

// ConfirmedMoved is what a channel tells its partition when its confirmed
// offset moved, and in full (Flush) after changes and when a follower
// connects, so the partition can replicate it to the followers. Ephemeral channels never send it.
type ConfirmedMoved struct {
	Channel string
	Update  OffsetUpdate
}

// PositionAsked: a replica is about to join the partition's ISR. The
// channel answers with PositionReported.
type PositionAsked struct{ Token int64 }

// PositionReported is a leader channel's confirmed state in full, and
// whether the channel is ordered: a replica joins the ISR only once it
// holds every ordered channel's position.
type PositionReported struct {
	Channel string
	Ordered bool
	Update  OffsetUpdate
	Token   int64
}

// OffsetSynced: a follower's channel received the leader's offset. Reply,
// if set, is called once the offset is applied.
type OffsetSynced struct {
	Update OffsetUpdate
	Reply  func()
}

// OrderChanged: the channel was made ordered or unordered.
type OrderChanged struct{ Ordered bool }

// OrderedFinished is what an ordered channel asks its partition after a
// FIN: confirm the new offset on every ISR member, then answer
// OrderedSynced. The channel delivers nothing until then.
type OrderedFinished struct {
	Channel    string
	Update     OffsetUpdate
	ConsumerID int64
	ID         uint64
	Out        Outbox // the FIN's consumer, for a refusal after it left
}

// OrderedSynced answers OrderedFinished, with its ConsumerID, ID and Out;
// Err says why the FIN failed.
type OrderedSynced struct {
	ConsumerID int64
	ID         uint64
	Out        Outbox
	Err        error
}

// DelayRequested asks the partition to write a long-delayed REQ's copy into
// the log (delayed.go); it answers DelayStored.
type DelayRequested struct {
	Channel string
	Move    DelayMove
	Reply   *actor.PID
}

// DelayStored answers DelayRequested; Err is set when nothing was written.
type DelayStored struct {
	ID  uint64
	Err error
}

// FollowerConnected: a stream from the partition's leader to a follower
// opened; the channel reports its whole confirmed state again.
type FollowerConnected struct{}

type tick struct{ gen uint64 }
type deliverDue struct{}
