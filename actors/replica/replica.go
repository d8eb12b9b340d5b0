// Package replica is the replica actor: on a partition's leader, one per
// follower. It holds the partition's stream on the session to the
// follower's node, sends the leader's writes in order and pipelined, turns
// the follower's acks into messages for the partition actor, and reports
// the follower down the moment the session breaks or its heartbeats stop.
package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/messages"
)

// Link is an open stream to one follower.
type Link interface {
	Send(*messages.LeaderFrame) error
	Close()
}

// Dialer opens a Link to a follower node. onFrame and onDown are called
// from the link's own goroutine, never after onDown.
type Dialer func(ctx context.Context, node string, onFrame func(*messages.FollowerFrame), onDown func(error)) (Link, error)

// Options configure a replica actor.
type Options struct {
	Topic     string
	Partition int32
	Node      string // the follower
	Dial      Dialer
	Redial    time.Duration // wait between connection attempts
	Logger    *slog.Logger
}

// Messages the replica actor receives from its partition actor.

// Replicate: send this write to the follower.
type Replicate struct{ Write *messages.ReplicaWrite }

// ReplicateOffset: send a channel's confirmed offset. Without a SyncId it
// is fire-and-forget: the channel's next change repeats it, and every
// channel reports in full again when the follower connects; with one, the
// follower acknowledges it (ordered channels).
type ReplicateOffset struct{ Update *messages.ChannelOffsetUpdate }

// Messages the replica actor sends to its parent, the partition actor.

// Acked: the follower answered a write.
type Acked struct {
	Node  string
	LogID int64
	Ack   *messages.ReplicaAck
}

// FollowerDown: the stream to the follower broke or went silent.
type FollowerDown struct {
	Node string
	Err  error
}

// FollowerUp: a stream to the follower is open (again).
type FollowerUp struct{ Node string }

type connected struct {
	link Link
	gen  int
}
type connectFailed struct {
	err error
	gen int
}
type linkDown struct {
	err error
	gen int
}
type redial struct{}

// Actor is the replica actor.
type Actor struct {
	opt     Options
	link    Link
	gen     int                      // link generation, so callbacks of a closed link are ignored
	down    bool                     // the follower was reported down since the last connect
	pending []*messages.ReplicaWrite // writes held while the first connect runs
	stop    context.CancelFunc
}

// maxPending bounds the writes held before the first connection; past it
// the follower counts as down.
const maxPending = 1024

// Props makes a replica actor.
func Props(opt Options) *actor.Props {
	if opt.Redial <= 0 {
		opt.Redial = 200 * time.Millisecond
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{opt: opt} })
}

func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.connect(ctx)
	case *connected:
		a.streamOpened(ctx, m)
	case *connectFailed:
		a.dialFailed(ctx, m)
	case *redial:
		a.connect(ctx)
	case *Replicate:
		a.replicate(ctx, m)
	case *ReplicateOffset:
		a.replicateOffset(ctx, m)
	case *linkDown:
		a.streamBroke(ctx, m)
	case *actor.Stopping:
		a.stopping()
	}
}

// streamOpened sends the writes held while the first dial ran. A stream
// from a dial that was given up on is closed.
func (a *Actor) streamOpened(ctx actor.Context, m *connected) {
	if m.gen != a.gen {
		m.link.Close()
		return
	}
	a.link, a.down = m.link, false
	ctx.Send(ctx.Parent(), &FollowerUp{Node: a.opt.Node})
	for _, w := range a.pending {
		a.send(ctx, w)
	}
	a.pending = nil
}

func (a *Actor) dialFailed(ctx actor.Context, m *connectFailed) {
	if m.gen == a.gen {
		a.reportDown(ctx, m.err)
		a.scheduleRedial(ctx)
	}
}

// replicate holds a write while the first dial runs, within maxPending,
// and sends it otherwise.
func (a *Actor) replicate(ctx actor.Context, m *Replicate) {
	if a.link == nil && !a.down && len(a.pending) < maxPending {
		a.pending = append(a.pending, m.Write)
		return
	}
	a.send(ctx, m.Write)
}

func (a *Actor) replicateOffset(ctx actor.Context, m *ReplicateOffset) {
	if a.link == nil {
		if m.Update.GetSyncId() != 0 {
			// Someone waits for this one's acknowledgement.
			a.reportDown(ctx, errNoLink)
		}
		return
	}
	if err := a.link.Send(&messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: m.Update}}); err != nil {
		a.lost(ctx, err)
	}
}

func (a *Actor) streamBroke(ctx actor.Context, m *linkDown) {
	if m.gen == a.gen {
		a.lost(ctx, m.err)
	}
}

func (a *Actor) stopping() {
	a.gen++
	if a.stop != nil {
		a.stop()
	}
	if a.link != nil {
		a.link.Close()
		a.link = nil
	}
}

type linkError string

func (e linkError) Error() string { return string(e) }

const errNoLink = linkError("no stream to the follower")

// lost drops the current link, reports the follower down and redials.
func (a *Actor) lost(ctx actor.Context, err error) {
	if a.link != nil {
		a.link.Close()
		a.link = nil
	}
	a.gen++
	a.reportDown(ctx, err)
	a.scheduleRedial(ctx)
}

func (a *Actor) send(ctx actor.Context, w *messages.ReplicaWrite) {
	if a.link == nil {
		a.reportDown(ctx, errNoLink)
		return
	}
	if err := a.link.Send(&messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: w}}); err != nil {
		a.lost(ctx, err)
	}
}

// reportDown tells the partition; it is repeated for every write sent while
// the follower is down, so each of them counts the follower as failed.
func (a *Actor) reportDown(ctx actor.Context, err error) {
	a.down = true
	a.pending = nil
	ctx.Send(ctx.Parent(), &FollowerDown{Node: a.opt.Node, Err: err})
}

func (a *Actor) scheduleRedial(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(a.opt.Redial, func() { root.Send(self, &redial{}) })
}

// connect dials in the background: the actor never blocks on the network.
func (a *Actor) connect(ctx actor.Context) {
	if a.stop != nil {
		a.stop()
	}
	a.gen++
	gen := a.gen
	dctx, cancel := context.WithCancel(context.Background())
	a.stop = cancel
	self, parent, root, opt := ctx.Self(), ctx.Parent(), ctx.ActorSystem().Root, a.opt
	go func() {
		link, err := opt.Dial(dctx, opt.Node,
			func(f *messages.FollowerFrame) {
				// An ack is a fact about the follower whichever stream
				// brought it: it goes straight to the partition actor, one
				// mailbox hop fewer on every write's path.
				if ack := f.GetAck(); ack != nil {
					root.Send(parent, &Acked{Node: opt.Node, LogID: ack.GetLogId(), Ack: ack})
				}
			},
			func(err error) { root.Send(self, &linkDown{err: err, gen: gen}) })
		if err != nil {
			root.Send(self, &connectFailed{err: err, gen: gen})
			return
		}
		root.Send(self, &connected{link: link, gen: gen})
	}()
}
