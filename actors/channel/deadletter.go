package channel

import (
	"context"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
)

// The shell's side of dead letters (dead.go): it publishes what the core
// hands out through Options.DeadLetters, which answers on its own
// goroutine, and turns the answer into DeadLettered or DeadLetterFailed
// in the mailbox. The actor never waits for a publish.

// DeadLetterPublisher publishes a channel's dead letters to its
// dead-letter topic. PublishDeadLetter must not block; it calls done once,
// on any goroutine, with where the letter went once the publish is
// acknowledged, or with why it was not.
type DeadLetterPublisher interface {
	PublishDeadLetter(from DeadLetterOrigin, l DeadLetter, done func(DeadLetterPlace, error))
}

// DeadLetterOrigin is the channel a dead letter comes from.
type DeadLetterOrigin struct {
	Topic     string
	Partition int32
	Channel   string
}

// MaxAttemptsChanged: the channel's max_attempts was set; 0 is none.
type MaxAttemptsChanged struct{ MaxAttempts uint16 }

// DeadLettered: a dead letter's publish was acknowledged.
type DeadLettered struct {
	ID uint64
	To DeadLetterPlace
}

// DeadLetterFailed: a dead letter could not be published; it is kept and
// published again later.
type DeadLetterFailed struct {
	ID  uint64
	Err error
}

func (a *Actor) maxAttemptsChanged(m *MaxAttemptsChanged) {
	if a.opt.DeadLetters == nil && m.MaxAttempts > 0 {
		// Nowhere to publish: dead messages would wait for ever.
		a.opt.Logger.Warn("max_attempts ignored: the topic has no dead-letter topic (ephemeral, or no room in its name for .dead)",
			"topic", a.opt.Topic, "partition", a.opt.Partition, "channel", a.opt.Name)
		return
	}
	a.core.SetMaxAttempts(m.MaxAttempts)
}

// publishDead hands the dead letters the core has for publishing to the
// publisher.
func (a *Actor) publishDead(ctx actor.Context) {
	letters := a.core.DeadLetters()
	if len(letters) == 0 {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	from := DeadLetterOrigin{Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: a.opt.Name}
	for _, l := range letters {
		id := l.ID
		a.opt.DeadLetters.PublishDeadLetter(from, l, func(to DeadLetterPlace, err error) {
			if err != nil {
				root.Send(self, &DeadLetterFailed{ID: id, Err: err})
				return
			}
			root.Send(self, &DeadLettered{ID: id, To: to})
		})
	}
}

// deadLettered confirms a published dead letter. On an ordered channel the
// new offset is confirmed on every ISR member first, as for a FIN, so a
// new leader does not deliver the dead message again before the next.
func (a *Actor) deadLettered(ctx actor.Context, m *DeadLettered) {
	if !a.core.DeadLettered(m.ID, m.To) {
		return
	}
	if a.core.Ordered() && a.opt.Dir != "" && !a.syncing && ctx.Parent() != nil {
		a.upkeep.Confirmed(a.opt.Now())
		a.syncing = true
		st := a.core.State()
		ctx.Send(ctx.Parent(), &OrderedFinished{Channel: a.opt.Name, ID: m.ID,
			Update: OffsetUpdate{Offset: st.Confirmed, Count: st.ConfirmedCount}})
		return
	}
	a.moved()
	a.deliverSoon(ctx)
}

// deadLetterFailed keeps a dead letter whose publish failed for a retry.
// A failure is a warning the first time and once a minute after: a
// dead-letter topic that cannot be made while nodes are away fails every
// second for each message waiting.
func (a *Actor) deadLetterFailed(m *DeadLetterFailed) {
	n := a.core.DeadLetterFailed(m.ID, a.opt.Now())
	level := slog.LevelDebug
	if n == 1 || n%60 == 0 {
		level = slog.LevelWarn
	}
	a.opt.Logger.Log(context.Background(), level, "publishing a dead letter failed; retrying", "topic", a.opt.Topic, "partition", a.opt.Partition,
		"channel", a.opt.Name, "id", m.ID, "failures", n, "retry_in", deadLetterRetry, "err", m.Err)
}
