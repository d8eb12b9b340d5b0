// Package replica is the replica actor: on a partition's leader, one per
// follower. It holds the partition's stream on the session to the
// follower's node, sends the leader's writes in order, turns the
// follower's acks into messages for the partition actor, and reports the
// follower down the moment the session breaks or its heartbeats stop.
//
// Writes leave in frames, at most FramesInFlight of them unanswered at
// once: writes that arrive while the limit is reached wait and leave
// together in one frame when an answer comes back, so under load the
// follower gets fewer, larger frames and answers each with one ack, and
// when idle a write leaves at once.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/messages"
)

// Link is an open stream to one follower.
type Link interface {
	Send(*messages.LeaderFrame) error
	// TakesFrames: the follower applies ReplicaWrites frames. One that
	// has not said so (an older version, during a rolling upgrade) gets
	// each write alone, at once.
	TakesFrames() bool
	Close()
}

// NowLink is a Link that can also write a frame from the caller's
// goroutine, without ever blocking it: what the socket does not take at
// once goes to the link's sender as Send's frames do.
type NowLink interface {
	SendNow(*messages.LeaderFrame) error
}

// LaterLink is a Link that can hold a frame for its next write instead of
// a write of its own (replication.Stream.SendLater).
type LaterLink interface {
	SendLater(*messages.LeaderFrame) error
}

// Unreachable is an error a Dialer may return when the follower's node
// cannot be reached now: Reachable ends when it may be again (the session
// to the node came up), and the actor tries again then, besides every
// RedialMax.
type Unreachable interface {
	error
	Reachable() context.Context
}

// Dialer opens a Link to a follower node. onFrame and onDown are called
// from the link's own goroutine, never after onDown.
type Dialer func(ctx context.Context, node string, onFrame func(f *messages.FollowerFrame, last bool), onDown func(error)) (Link, error)

// Attacher opens a Link to a follower node as a Dialer does, but only on
// a connection that is up now: it never blocks, and returns nil when a
// Dialer would have to connect.
type Attacher func(ctx context.Context, node string, onFrame func(f *messages.FollowerFrame, last bool), onDown func(error)) Link

// Options configure a replica actor.
type Options struct {
	Topic     string
	Partition int32
	Node      string // the follower
	Dial      Dialer
	// Attach, if set, is tried before Dial: a stream it opens is used in
	// the same turn, with no goroutine and no message to wait for, so a
	// new leader's first writes leave as soon as they come.
	Attach Attacher
	// OutOfReach, if set, reports without blocking that the follower's
	// node is known to be out of reach now (nil: a dial may succeed).
	// The actor asks it before each attempt, and waits for the node to
	// be reachable without a goroutine or a dial of its own.
	OutOfReach func(node string) Unreachable
	Redial     time.Duration // wait before the first attempt to connect again
	// RedialMax is the wait between attempts after one failed
	// (redialAfter); default DefaultRedialMax.
	RedialMax time.Duration
	Logger    *slog.Logger
	// FramesInFlight is how many frames of writes may be unanswered at
	// once (default 1; the node's flag makes it 2).
	FramesInFlight int
	// OnFrame, if set, hears of every frame of writes sent, with the
	// number of writes in it (1 for a single write).
	OnFrame func(writes int)
}

// Messages the replica actor receives from its partition actor.

// Replicate: send this write to the follower.
type Replicate struct {
	Write *messages.ReplicaWrite
	// Here, when set, is the Here of the publish behind the write: an idle
	// replica's turn then runs on that publisher's goroutine too, and its
	// frame is written from there (NowLink).
	Here *dispatch.Here
}

func (m *Replicate) RunsHere() *dispatch.Here { return m.Here }

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
	// Here, when set, lets the session's reader run the partition's turn
	// for this ack on its own goroutine (dispatch.Here).
	Here *dispatch.Here
}

func (m *Acked) RunsHere() *dispatch.Here { return m.Here }

// FollowerDown: the stream to the follower broke or went silent. From is
// the replica actor that saw it: one stopped meanwhile speaks of a stream
// the partition no longer uses.
type FollowerDown struct {
	Node string
	Err  error
	From *actor.PID
}

// FollowerUp: a stream to the follower is open (again); From as in
// FollowerDown.
type FollowerUp struct {
	Node string
	From *actor.PID
}

type connected struct {
	link   Link
	gen    int
	flight *flight
}
type connectFailed struct {
	err error
	gen int
}
type linkDown struct {
	err error
	gen int
}
type redial struct{ gen int }

// answered: the follower answered a frame while writes were waiting for
// room.
type answered struct{ gen int }

// flight counts a link's frames that are unanswered. The link's receive
// goroutine decrements it, and wakes the actor only when the actor said it
// waits, so an answer costs the actor a message only under load.
type flight struct {
	out     atomic.Int32
	waiting atomic.Bool
}

// answer records that a frame was answered and reports whether the actor
// waits for room.
func (f *flight) answer() bool {
	f.out.Add(-1)
	return f.waiting.CompareAndSwap(true, false)
}

// full reports whether limit frames are unanswered. When they are, it
// marks the actor as waiting and looks again, so an answer that came in
// between is not missed: either it sees the mark and wakes the actor, or
// the second look sees its room.
func (f *flight) full(limit int32) bool {
	if f.out.Load() < limit {
		return false
	}
	f.waiting.Store(true)
	if f.out.Load() < limit {
		f.waiting.Store(false)
		return false
	}
	return true
}

// Actor is the replica actor.
type Actor struct {
	opt     Options
	link    Link
	flight  *flight                  // the link's unanswered frames
	gen     int                      // link generation, so callbacks of a closed link are ignored
	down    bool                     // the follower was reported down since the last connect
	pending []*messages.ReplicaWrite // writes waiting: for the first connect, or for room in flight
	stop    context.CancelFunc
	now     bool // this turn's frames are written from its goroutine (send)
	soon    bool // the next attempt after a failure is the early one (redialAfter)
}

// maxPending bounds the writes held before the first connection; past it
// the follower counts as down.
const maxPending = 1024

// maxFrameBytes bounds the messages of the writes that share a frame, well
// under the transport's frame limit; a single larger write goes alone.
const maxFrameBytes = 1 << 20

// Props makes a replica actor.
func Props(opt Options) *actor.Props {
	if opt.Redial <= 0 {
		opt.Redial = 200 * time.Millisecond
	}
	if opt.RedialMax <= 0 {
		opt.RedialMax = DefaultRedialMax
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.FramesInFlight <= 0 {
		opt.FramesInFlight = 1
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Actor{opt: opt} })
}

func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.soon = true
		a.connect(ctx)
	case *connected:
		a.streamOpened(ctx, m)
	case *connectFailed:
		a.dialFailed(ctx, m)
	case *redial:
		if m.gen == a.gen {
			a.connect(ctx)
		}
	case *Replicate:
		a.replicate(ctx, m)
	case *ReplicateOffset:
		a.replicateOffset(ctx, m)
	case *answered:
		if m.gen == a.gen {
			a.flush(ctx)
		}
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
	a.link, a.flight, a.down = m.link, m.flight, false
	ctx.Send(ctx.Parent(), &FollowerUp{Node: a.opt.Node, From: ctx.Self()})
	a.flush(ctx)
}

func (a *Actor) dialFailed(ctx actor.Context, m *connectFailed) {
	if m.gen != a.gen {
		return
	}
	if !a.down {
		a.reportDown(ctx, m.err)
	}
	var u Unreachable
	if errors.As(m.err, &u) {
		a.redialWhenReachable(ctx, u.Reachable())
		return
	}
	a.scheduleRedial(ctx)
}

// replicate holds a write while the first dial runs, within maxPending,
// and queues it for the next frame otherwise.
func (a *Actor) replicate(ctx actor.Context, m *Replicate) {
	if a.link == nil {
		if !a.down && len(a.pending) < maxPending {
			a.pending = append(a.pending, m.Write)
			return
		}
		a.reportDown(ctx, errNoLink)
		return
	}
	a.pending = append(a.pending, m.Write)
	a.now = m.Here != nil
	a.flush(ctx)
	a.now = false
}

// flush sends the waiting writes, as many frames as there is room in
// flight for; what is left waits for an answer.
func (a *Actor) flush(ctx actor.Context) {
	if a.link != nil && !a.link.TakesFrames() {
		a.sendSingly(ctx)
		return
	}
	for len(a.pending) > 0 && a.link != nil && !a.flight.full(int32(a.opt.FramesInFlight)) {
		n, size := 1, len(a.pending[0].GetMessages())
		for n < len(a.pending) && size+len(a.pending[n].GetMessages()) <= maxFrameBytes {
			size += len(a.pending[n].GetMessages())
			n++
		}
		ws := a.pending[:n:n]
		a.pending = a.pending[n:]
		a.flight.out.Add(1)
		if err := a.send(&messages.LeaderFrame{Body: &messages.LeaderFrame_Writes{Writes: &messages.ReplicaWrites{Writes: ws}}}); err != nil {
			a.lost(ctx, err)
			return
		}
		if a.opt.OnFrame != nil {
			a.opt.OnFrame(n)
		}
	}
	if len(a.pending) == 0 {
		a.pending = nil // let the backing array of a burst go
	}
}

// send hands f to the link; a flush for a publish that came with a Here
// writes it from this goroutine when the link can.
func (a *Actor) send(f *messages.LeaderFrame) error {
	if nl, ok := a.link.(NowLink); ok && a.now {
		return nl.SendNow(f)
	}
	return a.link.Send(f)
}

// sendSingly sends each waiting write in a frame of its own, answered by
// an ack of its own, as followers that do not take ReplicaWrites expect.
func (a *Actor) sendSingly(ctx actor.Context) {
	for _, w := range a.pending {
		if err := a.link.Send(&messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: w}}); err != nil {
			a.lost(ctx, err)
			return
		}
		if a.opt.OnFrame != nil {
			a.opt.OnFrame(1)
		}
	}
	a.pending = nil
}

func (a *Actor) replicateOffset(ctx actor.Context, m *ReplicateOffset) {
	if a.link == nil {
		if m.Update.GetSyncId() != 0 {
			// Someone waits for this one's acknowledgement.
			a.reportDown(ctx, errNoLink)
		}
		return
	}
	f := &messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: m.Update}}
	var err error
	if ll, ok := a.link.(LaterLink); ok && m.Update.GetSyncId() == 0 {
		// No one waits for it: it rides on the session's next write.
		err = ll.SendLater(f)
	} else {
		err = a.link.Send(f)
	}
	if err != nil {
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
	a.soon = true
	a.reportDown(ctx, err)
	a.scheduleRedial(ctx)
}

// reportDown tells the partition; it is repeated for every write sent while
// the follower is down, so each of them counts the follower as failed.
func (a *Actor) reportDown(ctx actor.Context, err error) {
	a.down = true
	a.pending = nil
	ctx.Send(ctx.Parent(), &FollowerDown{Node: a.opt.Node, Err: err, From: ctx.Self()})
}

func (a *Actor) scheduleRedial(ctx actor.Context) {
	self, root, m := ctx.Self(), ctx.ActorSystem().Root, &redial{gen: a.gen}
	wait := redialAfter(a.opt.Redial, a.opt.RedialMax, a.soon, rand.Float64())
	a.soon = false
	time.AfterFunc(wait, func() { root.Send(self, m) })
}

// redialWhenReachable tries again as soon as the follower's node is
// reachable, and every RedialMax meanwhile: the session's own dialling
// finds the node back, once for all its streams, so the actor makes no
// early attempt of its own (redialAfter). Whichever comes first redials;
// the other is stale by then (redial.gen).
func (a *Actor) redialWhenReachable(ctx actor.Context, up context.Context) {
	self, root, m := ctx.Self(), ctx.ActorSystem().Root, &redial{gen: a.gen}
	a.soon = false
	timer := time.AfterFunc(redialAfter(a.opt.Redial, a.opt.RedialMax, false, rand.Float64()), func() { root.Send(self, m) })
	stop := context.AfterFunc(up, func() {
		timer.Stop()
		root.Send(self, m)
	})
	prev := a.stop
	a.stop = func() {
		stop()
		timer.Stop()
		if prev != nil {
			prev()
		}
	}
}

// DefaultRedialMax is the wait between attempts to reach a follower once
// one failed; the node's --replica-redial-max.
const DefaultRedialMax = 2 * time.Second

// redialAfter is the wait before the next attempt to connect: first
// when soon (the first retry after the actor started or lost its link),
// most otherwise, at a point of its upper half chosen by r (in [0, 1)).
//
// A stream that broke while its follower lives connects again at the
// early attempt. When the node itself is unreachable (gone, cut off or
// restarting: Unreachable) trying again soon only costs: a node that
// dies leaves every partition it followed with a replica actor on each
// leader, 3,300 of them on each survivor when 10,000 partitions have
// three replicas on three nodes, and every round of their attempts (a
// goroutine, a dial the session refuses, a timer) comes while the
// survivors take over the dead node's leaderships. Tried every 200 ms,
// and each failure reported to the partition, they doubled that
// takeover. Those wait for the node to be reachable, and try on their
// own only every most. The spread keeps thousands that failed together
// from trying together.
func redialAfter(first, most time.Duration, soon bool, r float64) time.Duration {
	d := most
	if soon {
		d = first
	}
	return d/2 + time.Duration(r*float64(d/2))
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
	if a.opt.OutOfReach != nil {
		if u := a.opt.OutOfReach(a.opt.Node); u != nil {
			a.dialFailed(ctx, &connectFailed{err: u, gen: gen})
			return
		}
	}
	self, parent, root, opt := ctx.Self(), ctx.Parent(), ctx.ActorSystem().Root, a.opt
	fl := &flight{}
	onFrame := func(f *messages.FollowerFrame, last bool) {
		// An ack is a fact about the follower whichever stream brought it:
		// it goes straight to the partition actor, one mailbox hop fewer
		// on every write's path. With nothing more to read, the session's
		// reader takes the partition's turn itself (dispatch.Here).
		var here *dispatch.Here
		if last {
			here = &dispatch.Here{}
			defer here.Run()
		}
		if ack := f.GetAck(); ack != nil {
			root.Send(parent, &Acked{Node: opt.Node, LogID: ack.GetLogId(), Ack: ack, Here: here})
		}
		if acks := f.GetAcks(); acks != nil {
			for _, ack := range acks.GetAcks() {
				root.Send(parent, &Acked{Node: opt.Node, LogID: ack.GetLogId(), Ack: ack, Here: here})
			}
			if fl.answer() {
				root.Send(self, &answered{gen: gen})
			}
		}
	}
	onDown := func(err error) { root.Send(self, &linkDown{err: err, gen: gen}) }
	if opt.Attach != nil {
		if link := opt.Attach(dctx, opt.Node, onFrame, onDown); link != nil {
			a.streamOpened(ctx, &connected{link: link, gen: gen, flight: fl})
			return
		}
	}
	go func() {
		link, err := opt.Dial(dctx, opt.Node, onFrame, onDown)
		if err != nil {
			root.Send(self, &connectFailed{err: err, gen: gen})
			return
		}
		root.Send(self, &connected{link: link, gen: gen, flight: fl})
	}()
}
