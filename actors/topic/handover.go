package topic

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// MovePlanned: the controller is about to move this partition's
// leadership to another replica (a planned move, not a failover). The
// leader holds its writes (Writer.HandOver): publishes queue, and the
// writes in flight commit, so the move fails none of them, and what
// queued goes on to the next leader, never written here. Reply is called
// once: true when nothing is in flight, false when this replica does not
// lead in Epoch, or when the hold ended first. Without the move, the
// hold ends after For and the queued publishes are written here.
type MovePlanned struct {
	Epoch int64
	For   time.Duration
	Reply func(drained bool)
}

// MoveNotStored: the controller did not store the move it planned (the
// partition changed first): the hold ends now rather than when it lapses.
type MoveNotStored struct{}

// handOverLapsed: the hold of hand-over gen ended without the move.
type handOverLapsed struct{ gen int }

// handOver is the shell's side of a hand-over: who waits to hear the
// writes drained, and which hold the pending lapse belongs to.
type handOver struct {
	gen     int
	waiting []func(bool)
}

func (a *Actor) movePlanned(ctx actor.Context, m *MovePlanned) {
	if !a.leads() || a.writer == nil || a.role.EpochForWrite != m.Epoch {
		m.Reply(false)
		return
	}
	a.writer.HandOver()
	a.handOver.gen++
	a.handOver.waiting = append(a.handOver.waiting, m.Reply)
	self, root, gen := ctx.Self(), ctx.ActorSystem().Root, a.handOver.gen
	time.AfterFunc(m.For, func() { root.Send(self, &handOverLapsed{gen: gen}) })
	a.answerDrained()
}

// answerDrained tells those waiting once no write is in flight.
func (a *Actor) answerDrained() {
	if len(a.handOver.waiting) == 0 || a.writer == nil || !a.writer.Drained() {
		return
	}
	a.answerHandOver(true)
}

func (a *Actor) answerHandOver(drained bool) {
	for _, reply := range a.handOver.waiting {
		reply(drained)
	}
	a.handOver.waiting = nil
}

// handOverEnded writes again when the move did not come: the controller
// failed to store it, or stored another change first.
func (a *Actor) handOverEnded(ctx actor.Context, m *handOverLapsed) {
	if m.gen != a.handOver.gen {
		return
	}
	a.endHold(ctx)
}

// moveNotStored ends the hold of the latest hand-over at once.
func (a *Actor) moveNotStored(ctx actor.Context) {
	a.handOver.gen++ // its lapse, still due, finds a later hand-over
	a.endHold(ctx)
}

func (a *Actor) endHold(ctx actor.Context) {
	if a.writer == nil || !a.writer.HandingOver() {
		return
	}
	a.answerHandOver(false)
	a.writer.EndHandOver()
	if a.writer.Waiting() > 0 {
		a.flushSoon(ctx)
	}
}
