package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/messages"
)

// fakeLink records frames and can be broken.
type fakeLink struct {
	mu      sync.Mutex
	sent    []*messages.LeaderFrame
	broken  bool
	singles bool // a follower of an older version: no ReplicaWrites
}

func (l *fakeLink) TakesFrames() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.singles
}

func (l *fakeLink) Send(f *messages.LeaderFrame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken {
		return errors.New("broken")
	}
	l.sent = append(l.sent, f)
	return nil
}
func (l *fakeLink) Close() {}

// logIDs lists the writes of frame i, nil when it holds none.
func (l *fakeLink) logIDs(i int) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []int64
	for _, w := range l.sent[i].GetWrites().GetWrites() {
		ids = append(ids, w.GetRecord().GetLogId())
	}
	return ids
}

func (l *fakeLink) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// parent spawns a replica actor as its child and records what it reports.
type parent struct {
	opt    Options
	events chan any
	ups    chan *FollowerUp
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Spawn(Props(p.opt))
	case *Acked, *FollowerDown:
		p.events <- m
	case *FollowerUp:
		select {
		case p.ups <- m:
		default: // a test that does not read them
		}
	case *Replicate, *ReplicateOffset:
		for _, c := range ctx.Children() {
			ctx.Send(c, m)
		}
	case barrier:
		close(m) // what was sent before is in the child's mailbox
	}
}

// barrier is closed by the parent once it has passed on everything sent
// to it before.
type barrier chan struct{}

// passedOn waits until the parent has handed the child everything sent to
// it so far.
func (h *harness) passedOn(t *testing.T) {
	t.Helper()
	b := make(barrier)
	h.system.Root.Send(h.pid, b)
	select {
	case <-b:
	case <-time.After(5 * time.Second):
		t.Fatal("the parent passed nothing on")
	}
}

type harness struct {
	system *actor.ActorSystem
	pid    *actor.PID
	events chan any
	ups    chan *FollowerUp // apart from events, which most tests read in order
	dialed chan struct{}
	link   *fakeLink
	frames func(*messages.FollowerFrame, bool)
	onDown func(error)
	mu     sync.Mutex
	// failing is how many of the next dials fail.
	failing atomic.Int32
	// dials counts the dials begun, gated or not.
	dials atomic.Int32
}

func start(t *testing.T, gate chan struct{}, dialErr error) *harness {
	return startWith(t, gate, dialErr, 0)
}

func startWith(t *testing.T, gate chan struct{}, dialErr error, framesInFlight int) *harness {
	return startOpts(t, gate, dialErr, 0, func(o *Options) { o.FramesInFlight = framesInFlight })
}

// startOpts starts a replica actor whose first failFirst dials fail (every
// one with dialErr) and whose redials wait an hour unless set says
// otherwise.
func startOpts(t *testing.T, gate chan struct{}, dialErr error, failFirst int32, set func(*Options)) *harness {
	h := &harness{
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })),
		events: make(chan any, 100),
		ups:    make(chan *FollowerUp, 100),
		dialed: make(chan struct{}, 10),
		link:   &fakeLink{},
	}
	h.failing.Store(failFirst)
	t.Cleanup(h.system.Shutdown)
	dial := func(ctx context.Context, node string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) (Link, error) {
		h.dials.Add(1)
		if gate != nil {
			<-gate
		}
		h.mu.Lock()
		h.frames, h.onDown = onFrame, onDown
		h.mu.Unlock()
		h.dialed <- struct{}{}
		if dialErr != nil {
			return nil, dialErr
		}
		if h.failing.Add(-1) >= 0 {
			return nil, errors.New("refused")
		}
		return h.link, nil
	}
	opt := Options{Topic: "t", Node: "n2", Dial: dial, Redial: time.Hour, RedialMax: time.Hour}
	set(&opt)
	p := &parent{opt: opt, events: h.events, ups: h.ups}
	h.pid = h.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }))
	return h
}

// answer has the follower answer a frame of writes with one ack.
func (h *harness) answer(logID int64) {
	h.mu.Lock()
	onFrame := h.frames
	h.mu.Unlock()
	onFrame(&messages.FollowerFrame{Body: &messages.FollowerFrame_Acks{Acks: &messages.ReplicaAcks{Acks: []*messages.ReplicaAck{{LogId: logID}}}}}, false)
}

func (h *harness) event(t *testing.T) any {
	t.Helper()
	select {
	case e := <-h.events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event from the replica actor")
		return nil
	}
}

func write(id int64) *Replicate {
	return &Replicate{Write: &messages.ReplicaWrite{Record: &messages.CommitRecord{LogId: id}}}
}

// Writes sent while the first connection is being made are held and sent,
// in order, once it is up.
func TestWritesHeldUntilConnected(t *testing.T) {
	gate := make(chan struct{})
	h := start(t, gate, nil)
	h.system.Root.Send(h.pid, write(1))
	h.system.Root.Send(h.pid, write(2))
	// Both writes wait in the replica actor's mailbox before the dial
	// can end: the connection comes up behind them.
	h.passedOn(t)
	close(gate)
	<-h.dialed
	eventually(t, "the held writes sent", func() bool { return h.link.count() == 1 })
	if got := h.link.logIDs(0); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("first frame holds writes %v, want 1 and 2 in order", got)
	}
}

// A write leaves at once when nothing is unanswered; writes that arrive
// while FramesInFlight frames wait for an answer leave together, in one
// frame, when an answer comes back.
func TestWritesWaitingForAnAnswerLeaveTogether(t *testing.T) {
	for _, inFlight := range []int{1, 2} {
		t.Run(fmt.Sprint(inFlight, " in flight"), func(t *testing.T) {
			h := startWith(t, nil, nil, inFlight)
			<-h.dialed
			for id := int64(1); id <= int64(inFlight); id++ {
				h.system.Root.Send(h.pid, write(id))
				eventually(t, "a write alone in its frame", func() bool { return h.link.count() == int(id) })
			}
			for id := int64(inFlight + 1); id <= int64(inFlight+3); id++ {
				h.system.Root.Send(h.pid, write(id))
			}
			// The partition actor's next message is handled after the
			// three writes: none of them may have left.
			h.system.Root.RequestFuture(h.pid, &ReplicateOffset{Update: &messages.ChannelOffsetUpdate{}}, time.Second)
			eventually(t, "the offset frame sent", func() bool { return h.link.count() == inFlight+1 })
			if got := h.link.logIDs(inFlight); got != nil {
				t.Fatalf("writes %v left while %d frames were unanswered", got, inFlight)
			}
			h.answer(int64(inFlight))
			if a, ok := h.event(t).(*Acked); !ok || a.LogID != int64(inFlight) {
				t.Fatalf("event %+v, want the ack of write %d", a, inFlight)
			}
			eventually(t, "the waiting writes sent", func() bool { return h.link.count() == inFlight+2 })
			want := []int64{int64(inFlight + 1), int64(inFlight + 2), int64(inFlight + 3)}
			if got := h.link.logIDs(inFlight + 1); !slices.Equal(got, want) {
				t.Fatalf("frame after the answer holds %v, want %v", got, want)
			}
		})
	}
}

// A channel position never leaves behind a write the partition sent after
// it, whether that write leaves at once or waits for room in flight: a
// follower takes a later leader's epoch from its write and from then on
// refuses positions stamped before it, so a position overtaken by the
// next epoch's first write would be refused (docs/replication.md,
// "epoch-fence"). Writes may wait; positions do not.
func TestAPositionLeavesBeforeTheWritesSentAfterIt(t *testing.T) {
	for _, inFlight := range []int{0, 1} {
		t.Run(fmt.Sprint(inFlight, " unanswered before"), func(t *testing.T) {
			h := startWith(t, nil, nil, 1)
			<-h.dialed
			for id := int64(1); id <= int64(inFlight); id++ {
				h.system.Root.Send(h.pid, write(id))
			}
			eventually(t, "the writes before sent", func() bool { return h.link.count() == inFlight })
			const epoch = 5
			h.system.Root.Send(h.pid, &ReplicateOffset{Update: &messages.ChannelOffsetUpdate{Channel: "c", EpochForWrite: epoch}})
			next := &Replicate{Write: &messages.ReplicaWrite{EpochForWrite: epoch + 1, Record: &messages.CommitRecord{LogId: 10}}}
			h.system.Root.Send(h.pid, next)
			if inFlight > 0 {
				h.passedOn(t)
				h.answer(int64(inFlight))
				if a, ok := h.event(t).(*Acked); !ok || a.LogID != int64(inFlight) {
					t.Fatalf("event %+v, want the ack of write %d", a, inFlight)
				}
			}
			eventually(t, "the position and the later write sent", func() bool { return h.link.count() == inFlight+2 })
			h.link.mu.Lock()
			defer h.link.mu.Unlock()
			position, later := -1, -1
			for i, f := range h.link.sent {
				if f.GetOffset() != nil {
					position = i
				}
				for _, w := range f.GetWrites().GetWrites() {
					if w.GetEpochForWrite() == epoch+1 {
						later = i
					}
				}
			}
			if position < 0 || later < 0 || position > later {
				t.Fatalf("the position left as frame %d and the write of epoch %d as frame %d: want the position first", position, epoch+1, later)
			}
		})
	}
}

// An ack from the follower reaches the partition as Acked.
func TestAckForwarded(t *testing.T) {
	h := start(t, nil, nil)
	<-h.dialed
	h.mu.Lock()
	onFrame := h.frames
	h.mu.Unlock()
	onFrame(&messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: &messages.ReplicaAck{LogId: 7}}}, false)
	if a, ok := h.event(t).(*Acked); !ok || a.LogID != 7 || a.Node != "n2" {
		t.Fatalf("event %+v", a)
	}
}

// A broken stream, a failed send or a failed dial is FollowerDown at once.
func TestFollowerDownReported(t *testing.T) {
	t.Run("stream down", func(t *testing.T) {
		h := start(t, nil, nil)
		<-h.dialed
		h.system.Root.Send(h.pid, write(1)) // after connected: goes out
		h.mu.Lock()
		onDown := h.onDown
		h.mu.Unlock()
		onDown(errors.New("heartbeats stopped"))
		if _, ok := h.event(t).(*FollowerDown); !ok {
			t.Fatal("no FollowerDown")
		}
	})
	t.Run("send fails", func(t *testing.T) {
		h := start(t, nil, nil)
		<-h.dialed
		h.system.Root.Send(h.pid, write(1))
		eventually(t, "a write on the stream", func() bool { return h.link.count() > 0 })
		h.answer(1)
		if _, ok := h.event(t).(*Acked); !ok {
			t.Fatal("no Acked")
		}
		h.link.mu.Lock()
		h.link.broken = true
		h.link.mu.Unlock()
		h.system.Root.Send(h.pid, write(2))
		if _, ok := h.event(t).(*FollowerDown); !ok {
			t.Fatal("no FollowerDown")
		}
	})
	t.Run("dial fails", func(t *testing.T) {
		h := start(t, nil, errors.New("refused"))
		<-h.dialed
		if _, ok := h.event(t).(*FollowerDown); !ok {
			t.Fatal("no FollowerDown")
		}
	})
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A follower that has not said it takes frames of writes (an older version,
// during a rolling upgrade) gets every write alone and at once, whatever
// is unanswered.
func TestWritesGoSinglyToAFollowerThatTakesNoFrames(t *testing.T) {
	h := start(t, nil, nil)
	h.link.mu.Lock()
	h.link.singles = true
	h.link.mu.Unlock()
	<-h.dialed
	for id := int64(1); id <= 3; id++ {
		h.system.Root.Send(h.pid, write(id))
	}
	eventually(t, "three frames", func() bool { return h.link.count() == 3 })
	h.link.mu.Lock()
	defer h.link.mu.Unlock()
	for i, f := range h.link.sent {
		if f.GetWrite().GetRecord().GetLogId() != int64(i+1) {
			t.Fatalf("frame %d is %v, want write %d alone", i, f, i+1)
		}
	}
}

// A lost follower is tried again soon, once; after that every RedialMax.
// Each wait is spread over the upper half of its length, so the replicas
// of a dead node's partitions neither retry every 200 ms nor all at once.
func TestRedialSoonOnceThenEveryRedialMaxSpread(t *testing.T) {
	const first, most = 200 * time.Millisecond, 2 * time.Second
	for _, c := range []struct {
		soon bool
		want time.Duration
	}{{true, first}, {false, most}} {
		if lo, hi := redialAfter(first, most, c.soon, 0), redialAfter(first, most, c.soon, 0.999999); lo != c.want/2 || hi > c.want || hi < c.want-time.Millisecond {
			t.Fatalf("soon %v: the wait spans %v to %v; want %v to %v", c.soon, lo, hi, c.want/2, c.want)
		}
	}
	if a, b := redialAfter(first, most, false, 0.1), redialAfter(first, most, false, 0.9); b-a < most/4 {
		t.Fatalf("waits of %v and %v: not spread", a, b)
	}
}

// The early retry comes once after the actor starts and once after each
// link it loses; the long wait (an hour here) only after an attempt that
// failed. A follower whose first dial fails is reached at the early retry,
// and one whose stream breaks is dialled again at once.
func TestRedialEarlyAfterStartAndAfterEachLoss(t *testing.T) {
	h := startOpts(t, nil, nil, 1, func(o *Options) { o.Redial = time.Millisecond })
	dialed := func(what string) {
		t.Helper()
		select {
		case <-h.dialed:
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s", what)
		}
	}
	dialed("first dial")
	dialed("early retry after the first dial failed")
	h.system.Root.Send(h.pid, write(1))
	eventually(t, "a write on the stream", func() bool { return h.link.count() == 1 })
	h.mu.Lock()
	onDown := h.onDown
	h.mu.Unlock()
	onDown(errors.New("connection reset"))
	dialed("early retry after the stream broke")
}

// A follower that stays unreachable is reported down once, not at every
// attempt to reach it: writes sent meanwhile are each reported, and the
// partitions of a dead node's thousands of replica actors are not woken
// for every failed dial.
func TestUnreachableFollowerReportedDownOnce(t *testing.T) {
	h := startOpts(t, nil, errors.New("refused"), 0, func(o *Options) {
		o.Redial, o.RedialMax = time.Millisecond, 2*time.Millisecond
	})
	for range 5 {
		<-h.dialed
	}
	// The reports of the first four failures reached the parent before
	// the fifth attempt began.
	h.passedOn(t)
	if n := len(h.events); n != 1 {
		t.Fatalf("%d reports of the follower down after 5 failed attempts; want 1", n)
	}
	h.system.Root.Send(h.pid, write(1))
	if _, ok := h.event(t).(*FollowerDown); !ok {
		t.Fatal("no FollowerDown for a write sent while the follower is down")
	}
}

// unreachable is a Dialer's error that names when to try again.
type unreachable struct{ up context.Context }

func (unreachable) Error() string                { return "node unreachable" }
func (u unreachable) Reachable() context.Context { return u.up }

// A dial that fails because the follower's node is unreachable is tried
// again when the node is reachable, not early on a timer of the actor's
// own: the session finds the node back once for all its streams.
func TestRedialWhenTheNodeIsReachableAgain(t *testing.T) {
	up, reachable := context.WithCancel(context.Background())
	defer reachable()
	h := startOpts(t, nil, unreachable{up}, 0, func(o *Options) { o.Redial = time.Millisecond })
	<-h.dialed
	if _, ok := h.event(t).(*FollowerDown); !ok {
		t.Fatal("an unreachable follower was not reported down")
	}
	// The early attempt would come 0.5–1 ms after the failure.
	select {
	case <-h.dialed:
		t.Fatal("tried again early while the node was unreachable")
	case <-time.After(50 * time.Millisecond):
	}
	reachable()
	select {
	case <-h.dialed:
	case <-time.After(5 * time.Second):
		t.Fatal("not tried again once the node was reachable")
	}
}

// A follower whose node is known out of reach is not dialled: the actor
// reports it down and waits for the node to be reachable, then dials.
// Thousands of replica actors of a dead node each dialling on a goroutine
// of its own crowded the survivors' schedulers during the failover.
func TestOutOfReachFollowerNotDialledUntilReachable(t *testing.T) {
	up, reachable := context.WithCancel(context.Background())
	defer reachable()
	var asked atomic.Int32
	h := startOpts(t, nil, nil, 0, func(o *Options) {
		o.Redial = time.Millisecond
		o.OutOfReach = func(node string) Unreachable {
			asked.Add(1)
			if node != "n2" {
				t.Errorf("asked about %q, want the follower n2", node)
			}
			if up.Err() != nil {
				return nil
			}
			return unreachable{up}
		}
	})
	if _, ok := h.event(t).(*FollowerDown); !ok {
		t.Fatal("a follower out of reach was not reported down")
	}
	if asked.Load() == 0 {
		t.Fatal("the actor did not ask whether the follower was out of reach")
	}
	select {
	case <-h.dialed:
		t.Fatal("dialled a follower known out of reach")
	case <-time.After(50 * time.Millisecond):
	}
	reachable()
	select {
	case <-h.dialed:
	case <-time.After(5 * time.Second):
		t.Fatal("not dialled once the node was reachable")
	}
	// A write that reaches a follower known down before its new link is
	// open is dropped (the leader catches it up): the write goes once the
	// actor reports the follower up.
	select {
	case <-h.ups:
	case <-time.After(5 * time.Second):
		t.Fatal("the follower was not reported up once dialled")
	}
	h.system.Root.Send(h.pid, write(1))
	eventually(t, "the write sent on the new link", func() bool { return h.link.count() == 1 })
}

// A stream attached to a session that is up opens in the actor's first
// turn: writes leave on it with no dial, and acks come back through it.
// When nothing can be attached, the actor dials.
func TestAttachedStreamNeedsNoDial(t *testing.T) {
	gate := make(chan struct{}) // holds any dial until the test ends
	t.Cleanup(func() { close(gate) })
	attached := &fakeLink{}
	var onFrame func(*messages.FollowerFrame, bool)
	var mu sync.Mutex
	h := startOpts(t, gate, nil, 0, func(o *Options) {
		o.Attach = func(ctx context.Context, node string, f func(*messages.FollowerFrame, bool), _ func(error)) Link {
			if node != "n2" {
				t.Errorf("attach to %q, want the follower n2", node)
			}
			mu.Lock()
			onFrame = f
			mu.Unlock()
			return attached
		}
	})
	h.system.Root.Send(h.pid, write(1))
	eventually(t, "the write sent on the attached stream", func() bool { return attached.count() == 1 })
	if got := attached.logIDs(0); !slices.Equal(got, []int64{1}) {
		t.Fatalf("frame holds writes %v, want 1", got)
	}
	mu.Lock()
	f := onFrame
	mu.Unlock()
	f(&messages.FollowerFrame{Body: &messages.FollowerFrame_Acks{Acks: &messages.ReplicaAcks{Acks: []*messages.ReplicaAck{{LogId: 1}}}}}, false)
	if a, ok := h.event(t).(*Acked); !ok || a.LogID != 1 {
		t.Fatalf("event %+v, want the ack of write 1", a)
	}
	if n := h.dials.Load(); n != 0 {
		t.Fatalf("dialled %d times although a stream was attached", n)
	}

	t.Run("nothing to attach to", func(t *testing.T) {
		var tried atomic.Bool
		h := startOpts(t, nil, nil, 0, func(o *Options) {
			o.Attach = func(context.Context, string, func(*messages.FollowerFrame, bool), func(error)) Link {
				tried.Store(true)
				return nil
			}
		})
		<-h.dialed
		if !tried.Load() {
			t.Fatal("dialled without trying to attach first")
		}
		h.system.Root.Send(h.pid, write(1))
		eventually(t, "the write sent on the dialled link", func() bool { return h.link.count() == 1 })
	})
}
