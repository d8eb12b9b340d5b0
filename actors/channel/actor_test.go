package channel

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/storage"
)

// sliceLog is a committed log held in memory.
type sliceLog []storage.StoredMessage

func (l sliceLog) ReadMessages(off, end int64, _ []byte) ([]storage.StoredMessage, int64, error) {
	var out []storage.StoredMessage
	next := off
	for _, m := range l {
		if m.Offset >= off && m.Offset+int64(m.Size) <= end {
			out = append(out, m)
			next = m.Offset + int64(m.Size)
		}
	}
	return out, next, nil
}

// received counts the messages actors receive, by type.
type received struct {
	mu     sync.Mutex
	byType map[string]int
	total  int
}

func (r *received) option() actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			r.mu.Lock()
			if r.byType == nil {
				r.byType = map[string]int{}
			}
			r.byType[fmt.Sprintf("%T", env.Message)]++
			r.total++
			r.mu.Unlock()
			next(c, env)
		}
	})
}

func (r *received) snapshot() (int, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byType))
	for k, v := range r.byType {
		out[k] = v
	}
	return r.total, out
}

// becomesQuiet waits, up to a few seconds, for a window in which the actors
// receive nothing; window is many times their shortest timer, so a ticker
// or a timer re-armed with nothing to do never lets it pass.
func (r *received) becomesQuiet(t *testing.T, window time.Duration) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		before, types := r.snapshot()
		time.Sleep(window)
		after, now := r.snapshot()
		if after == before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("actors never idle: %d messages in the last %v: before %v, after %v", after-before, window, types, now)
		}
	}
}

// parent stands in for the partition actor: it spawns the channel and
// hears what the channel tells it.
type parent struct {
	props *actor.Props
	child chan *actor.PID
	moved chan OffsetUpdate
	// synced hears each ordered confirmation, which the parent answers
	// as a partition whose ISR took it, unless held takes it: then the
	// test answers.
	synced chan OffsetUpdate
	held   chan *OrderedFinished
}

func (p *parent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(p.props)
	case *ConfirmedMoved:
		select {
		case p.moved <- m.Update:
		default:
		}
	case *OrderedFinished:
		if p.held != nil {
			p.held <- m
			return
		}
		select {
		case p.synced <- m.Update:
		default:
		}
		ctx.Send(ctx.Children()[0], &OrderedSynced{ConsumerID: m.ConsumerID, ID: m.ID, Out: m.Out})
	}
}

type box struct {
	deliveries chan Delivery
	refused    chan error
}

func (b *box) Deliver(_ string, _ int32, ds []Delivery) {
	for _, d := range ds {
		b.deliveries <- d
	}
}
func (b *box) Refused(_ string, _ uint64, err error) { b.refused <- err }
func (b *box) ChannelGone()                          {}

func (b *box) next(t *testing.T) Delivery {
	t.Helper()
	select {
	case d := <-b.deliveries:
		return d
	case err := <-b.refused:
		t.Fatalf("refused: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
	}
	return Delivery{}
}

type channelRig struct {
	system *actor.ActorSystem
	pid    *actor.PID
	parent *parent
	box    *box
	dir    string
	recv   *received
	cons   *Consumer
}

// startChannel runs a channel actor over log, as the child of a stand-in
// partition, with a consumer of the given message timeout subscribed;
// first are sent to the channel before the consumer subscribes, and
// publisher, when set, takes its dead letters.
func startChannel(t *testing.T, log sliceLog, msgTimeout time.Duration, publisher DeadLetterPublisher, first ...any) *channelRig {
	t.Helper()
	return startChannelSaving(t, nil, log, msgTimeout, publisher, first...)
}

// startChannelSaving is startChannel with the channel's state saved
// through states.
func startChannelSaving(t *testing.T, states *storage.ChannelStates, log sliceLog, msgTimeout time.Duration, publisher DeadLetterPublisher, first ...any) *channelRig {
	t.Helper()
	r := &channelRig{
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })),
		dir:    t.TempDir(),
		recv:   &received{},
		box:    &box{deliveries: make(chan Delivery, 100), refused: make(chan error, 100)},
	}
	t.Cleanup(r.system.Shutdown)
	last := log[len(log)-1]
	props := Props(Options{
		Topic: "t", Name: "c", Dir: r.dir, Log: log, PersistEvery: 20 * time.Millisecond, States: states,
		Logger: slog.New(slog.DiscardHandler), DeadLetters: publisher,
	}, storage.ChannelState{}, last.Offset+int64(last.Size), int64(len(log))).Configure(r.recv.option())
	r.parent = &parent{props: props, child: make(chan *actor.PID, 1), moved: make(chan OffsetUpdate, 100), synced: make(chan OffsetUpdate, 100)}
	parentPID := r.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r.parent }))
	// The channel saves its state as it stops: stopping it, and waiting,
	// before the temporary directory goes keeps a late save from racing
	// the directory's removal.
	t.Cleanup(func() {
		if err := r.system.Root.StopFuture(parentPID).Wait(); err != nil {
			t.Errorf("stopping the channel: %v", err)
		}
	})
	r.pid = <-r.parent.child
	for _, m := range first {
		r.system.Root.Send(r.pid, m)
	}
	cons := &Consumer{ID: 1, MsgTimeout: msgTimeout, Out: r.box}
	cons.SetChannels([]*actor.PID{r.pid})
	cons.SetRDY(10)
	r.cons = cons
	r.system.Root.Send(r.pid, &Subscribed{Consumer: cons})
	return r
}

// An idle channel (nothing in flight or deferred, its state saved and
// reported) receives nothing: no persist ticker, no timer. What FINs
// changed was reported to the partition and saved first.
func TestIdleChannelReceivesNothing(t *testing.T) {
	log := sliceLog(logOf(3))
	r := startChannel(t, log, time.Minute, nil)
	for range 3 {
		r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: r.box.next(t).ID})
	}
	end := int64(40 * 3)
	for full := false; !full; {
		select {
		case u := <-r.parent.moved:
			full = u.Flush && u.Offset == end
		case <-time.After(5 * time.Second):
			t.Fatal("the FINs' confirmed offset never reached the partition in full")
		}
	}
	waitUntil(t, fmt.Sprintf("the saved state to confirm %d", end), func() bool {
		st, found, err := storage.LoadChannelState(r.dir, "c")
		return err == nil && found && st.Confirmed == end
	})
	r.recv.becomesQuiet(t, 300*time.Millisecond)
}

// Timeouts, REQ delays and deferred log messages still come due, each at
// its time, and the channel is quiet once nothing is left.
func TestChannelTimersStillComeDue(t *testing.T) {
	log := sliceLog(logOf(2))
	deferredUntil := time.Now().Add(300 * time.Millisecond)
	log[1].DeliverAt = deferredUntil.UnixNano()
	start := time.Now()
	r := startChannel(t, log, 100*time.Millisecond, nil)

	d := r.box.next(t)
	if d.ID != 1 || d.Attempts != 1 {
		t.Fatalf("first delivery %+v", d)
	}
	// Not answered: it times out and comes again. On a loaded machine the
	// first delivery may come so late that the deferred message is due
	// before the timeout; it is taken (and checked below) as it comes.
	got := map[uint64]time.Time{}
	for d = r.box.next(t); d.ID == 2; d = r.box.next(t) {
		got[2] = time.Now()
		r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: 2})
	}
	if d.ID != 1 || d.Attempts != 2 || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("after the timeout: %+v at %v", d, time.Since(start))
	}
	reqAt := time.Now()
	r.system.Root.Send(r.pid, &Requeued{ConsumerID: 1, ID: 1, Delay: 150 * time.Millisecond})
	for len(got) < 2 {
		d := r.box.next(t)
		got[d.ID] = time.Now()
		r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: d.ID})
	}
	if at := got[1]; at.Sub(reqAt) < 150*time.Millisecond {
		t.Fatalf("REQ'd for 150ms, delivered again after %v", at.Sub(reqAt))
	}
	if at := got[2]; at.Before(deferredUntil) {
		t.Fatalf("deferred message delivered %v early", deferredUntil.Sub(at))
	}
	_, types := r.recv.snapshot()
	if types["*channel.tick"] == 0 {
		t.Fatalf("no timer fired: %v", types)
	}
	// The FINs' state is saved within PersistEvery; then nothing is left.
	waitUntil(t, "the state to be saved", func() bool {
		st, found, err := storage.LoadChannelState(r.dir, "c")
		return err == nil && found && st.Confirmed == 80
	})
	r.recv.becomesQuiet(t, 300*time.Millisecond)
}

// Idle channel actors hold no goroutine: their number does not grow the
// node's goroutines.
func TestIdleChannelsHoldNoGoroutine(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	log := sliceLog(logOf(1))
	base := runtime.NumGoroutine()
	const n = 500
	dir := t.TempDir()
	pids := make([]*actor.PID, n)
	t.Cleanup(func() { stopAll(t, system, pids) })
	for i := range pids {
		pids[i] = system.Root.Spawn(Props(Options{
			Topic: "t", Name: fmt.Sprint("c", i), Dir: dir, Log: log, PersistEvery: 20 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler),
		}, storage.ChannelState{}, 40, 1))
	}
	for _, pid := range pids {
		if _, err := system.Root.RequestFuture(pid, &StatsRequested{}, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, fmt.Sprintf("goroutines to settle near %d with %d idle channels", base, n), func() bool {
		return runtime.NumGoroutine() < base+n/10
	})
}

// Channel actors that read the log hold no read buffer once they are
// done: 500 of them, each having read its messages, take far less than
// the quarter megabyte one read borrows.
func TestChannelsHoldNoReadBufferWhenDone(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	log := sliceLog(logOf(3))
	heap := func() uint64 {
		// Twice: a pool's buffers outlive one collection.
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const n = 500
	dir := t.TempDir()
	pids := make([]*actor.PID, n)
	t.Cleanup(func() { stopAll(t, system, pids) })
	for i := range pids {
		pids[i] = system.Root.Spawn(Props(Options{
			Topic: "t", Name: fmt.Sprint("c", i), Dir: dir, Log: log, Logger: slog.New(slog.DiscardHandler),
		}, storage.ChannelState{}, 0, 0))
		system.Root.Send(pids[i], &Committed{End: 120, Count: 3})
	}
	for _, pid := range pids {
		res, err := system.Root.RequestFuture(pid, &StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if st := res.(*Snapshot).Stats; st.Depth != 3 {
			t.Fatalf("a channel holds %d messages, want the log's 3 read ahead", st.Depth)
		}
	}
	grown := int64(heap()) - int64(before)
	if per := grown / n; per > readBufferSize/8 {
		t.Errorf("each of %d channels that read the log holds %d bytes: its read buffer stayed (%d)", n, per, readBufferSize)
	}
}

// stopAll stops the channels and waits for them, so that none saves its
// state into a directory the test is removing.
func stopAll(t *testing.T, system *actor.ActorSystem, pids []*actor.PID) {
	for _, pid := range pids {
		if pid == nil {
			continue
		}
		if err := system.Root.StopFuture(pid).Wait(); err != nil {
			t.Errorf("stopping a channel: %v", err)
		}
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A channel that starts reports where it stands in full once, so
// followers that opened the channel at their own end move to it, and then
// is quiet.
func TestStartedChannelReportsOnce(t *testing.T) {
	r := startChannel(t, sliceLog(logOf(3)), time.Minute, nil)
	select {
	case u := <-r.parent.moved:
		if !u.Flush || !u.AllowBackward || u.Offset != 0 {
			t.Fatalf("first report %+v, want a full one at offset 0", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a started channel never reported its offset")
	}
	r.recv.becomesQuiet(t, 300*time.Millisecond)
	select {
	case u := <-r.parent.moved:
		t.Fatalf("reported again with nothing changed: %+v", u)
	default:
	}
}

// A consumer whose connection stays but stops consuming the channel (its
// SUB followed the partition's leadership elsewhere) gets the slots of its
// window back at once, and what it had in flight goes to another consumer
// without waiting for the message timeout.
func TestUnsubscribedConsumerGetsItsWindowBack(t *testing.T) {
	r := startChannel(t, sliceLog(logOf(3)), time.Hour, nil)
	first := []uint64{r.box.next(t).ID, r.box.next(t).ID, r.box.next(t).ID}
	if n := r.cons.InFlight(); n != 3 {
		t.Fatalf("consumer 1 holds %d in flight, want 3", n)
	}
	other := &box{deliveries: make(chan Delivery, 100), refused: make(chan error, 100)}
	cons2 := &Consumer{ID: 2, MsgTimeout: time.Hour, Out: other}
	cons2.SetChannels([]*actor.PID{r.pid})
	cons2.SetRDY(10)
	r.system.Root.Send(r.pid, &Subscribed{Consumer: cons2})
	r.system.Root.Send(r.pid, &Unsubscribed{ConsumerID: 1})
	for _, id := range first {
		if d := other.next(t); d.ID != id || d.Attempts != 2 {
			t.Fatalf("consumer 2 got %d (attempt %d), want %d again, its second attempt", d.ID, d.Attempts, id)
		}
	}
	if n := r.cons.InFlight(); n != 0 {
		t.Fatalf("consumer 1 still holds %d slots of its window", n)
	}
	// Consumer 1's FIN, arriving late, confirms nothing: consumer 2 holds
	// every message now.
	r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: first[0]})
	res, err := r.system.Root.RequestFuture(r.pid, &StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if st := res.(*Snapshot).Stats; st.InFlight != 3 {
		t.Fatalf("after consumer 1's late FIN: %+v, want consumer 2's 3 in flight", st)
	}
}

// One consumer's window is shared by every partition it consumes: a
// channel that takes room in it and then finds nothing it may deliver (an
// ordered channel whose one message is in flight elsewhere) gives the room
// back, and must wake the channels that found the window full meanwhile,
// or they wait for ever with the window open. The room appears here
// without a wake-up, as a collision with the ordered channel's hold would
// have left it, and only the ordered channel is woken.
func TestReturnedWindowWakesTheOtherChannels(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	spawn := func(p int32, log sliceLog) *actor.PID {
		last := log[len(log)-1]
		return system.Root.Spawn(Props(Options{Topic: "t", Partition: p, Name: "c", Log: log, Logger: slog.New(slog.DiscardHandler)},
			storage.ChannelState{}, last.Offset+int64(last.Size), int64(len(log))))
	}
	ordered, plain := spawn(0, sliceLog(logOf(3))), spawn(1, sliceLog(logOf(3)))
	system.Root.Send(ordered, &OrderChanged{Ordered: true})
	// Another consumer holds the ordered channel's first message, so it
	// can give ours nothing.
	holder := &box{deliveries: make(chan Delivery, 10), refused: make(chan error, 10)}
	hold := &Consumer{ID: 2, MsgTimeout: time.Hour, Out: holder}
	hold.SetChannels([]*actor.PID{ordered})
	hold.SetRDY(1)
	system.Root.Send(ordered, &Subscribed{Consumer: hold})
	holder.next(t)

	ours := &box{deliveries: make(chan Delivery, 10), refused: make(chan error, 10)}
	cons := &Consumer{ID: 1, MsgTimeout: time.Hour, Out: ours}
	cons.SetChannels([]*actor.PID{ordered, plain})
	system.Root.Send(ordered, &Subscribed{Consumer: cons})
	system.Root.Send(plain, &Subscribed{Consumer: cons})
	for _, pid := range []*actor.PID{ordered, plain} { // both took the subscription
		if _, err := system.Root.RequestFuture(pid, &StatsRequested{}, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	cons.rdy.Store(1)
	system.Root.Send(ordered, &WindowOpened{})
	if d := ours.next(t); d.ID != 1 {
		t.Fatalf("the plain channel delivered %d first, want 1", d.ID)
	}
}

// fakePublisher answers dead letters, once proceed lets it: with an error
// while fail says so.
type fakePublisher struct {
	letters chan DeadLetter
	proceed chan struct{}
	fail    func(n int) bool
	mu      sync.Mutex
	n       int
}

func (p *fakePublisher) PublishDeadLetter(from DeadLetterOrigin, l DeadLetter, done func(DeadLetterPlace, error)) {
	p.mu.Lock()
	p.n++
	failing := p.fail(p.n)
	p.mu.Unlock()
	p.letters <- l
	<-p.proceed
	if failing {
		done(DeadLetterPlace{}, fmt.Errorf("publish %d refused", p.n))
		return
	}
	done(DeadLetterPlace{Topic: from.Topic + ".dead", Partition: from.Partition}, nil)
}

// The shell's side of dead letters on an ordered channel: the REQ of a
// last delivery hands the message to the publisher without delivering the
// next; a failed publish is retried after deadLetterRetry; the
// acknowledged one is confirmed on the ISR (OrderedFinished) before the
// next message goes out.
func TestDeadLetterPublishedRetriedThenConfirmed(t *testing.T) {
	pub := &fakePublisher{letters: make(chan DeadLetter, 10), proceed: make(chan struct{}), fail: func(n int) bool { return n == 1 }}
	r := startChannel(t, sliceLog(logOf(2)), time.Minute, pub, &OrderChanged{Ordered: true}, &MaxAttemptsChanged{MaxAttempts: 1})
	d := r.box.next(t)
	if d.ID != 1 || d.Attempts != 1 {
		t.Fatalf("first delivery %+v", d)
	}
	r.system.Root.Send(r.pid, &Requeued{ConsumerID: 1, ID: 1})
	start := time.Now()
	for try := 1; try <= 2; try++ {
		select {
		case l := <-pub.letters:
			if l.ID != 1 || l.Attempts != 1 || string(l.Body) != "a" {
				t.Fatalf("publish %d: %+v", try, l)
			}
			select {
			case d := <-r.box.deliveries:
				t.Fatalf("delivered %d while the dead letter was not published", d.ID)
			default:
			}
			pub.proceed <- struct{}{}
		case <-time.After(5 * time.Second):
			t.Fatalf("publish %d never came", try)
		}
	}
	if waited := time.Since(start); waited < deadLetterRetry {
		t.Fatalf("retried after %v, before deadLetterRetry", waited)
	}
	select {
	case u := <-r.parent.synced:
		if u.Offset != 40 || u.Count != 1 {
			t.Fatalf("ordered confirmation %+v, want past message 1", u)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the dead letter was not confirmed on the ISR")
	}
	if d := r.box.next(t); d.ID != 2 {
		t.Fatalf("after the dead letter: %+v", d)
	}
}

// Partitions held back by their rate limits do not take room in a shared
// window only to give it back: each giving back wakes the others, which
// would do the same, for as long as the limits hold. A probe among the
// consumer's channels counts the wake-ups.
func TestRateLimitedChannelsDoNotWakeEachOther(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	var wakes atomic.Int64
	probe := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*WindowOpened); ok {
			wakes.Add(1)
		}
	}))
	big := func() sliceLog { // two 8 KB messages: one goes, the next waits 8 s at 1 KB/s
		l := logOf(2)
		for i := range l {
			l[i].Offset, l[i].Size, l[i].Body = int64(9000*i), 9000, make([]byte, 8192)
		}
		return l
	}
	ours := &box{deliveries: make(chan Delivery, 10), refused: make(chan error, 10)}
	cons := &Consumer{ID: 1, MsgTimeout: time.Hour, Out: ours}
	cons.SetRDY(3)
	var pids []*actor.PID
	for p := range int32(2) {
		pid := system.Root.Spawn(Props(Options{Topic: "t", Partition: p, Name: "c", Log: big(), Logger: slog.New(slog.DiscardHandler)},
			storage.ChannelState{}, 18000, 2))
		system.Root.Send(pid, &RateLimitChanged{KB: 1})
		pids = append(pids, pid)
	}
	cons.SetChannels(append(slices.Clone(pids), probe))
	for _, pid := range pids {
		system.Root.Send(pid, &Subscribed{Consumer: cons})
	}
	ours.next(t)
	ours.next(t)
	// Both wait for their limits with one slot of the window free.
	for range 20 {
		for _, pid := range pids {
			if _, err := system.Root.RequestFuture(pid, &StatsRequested{}, 5*time.Second).Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := wakes.Load(); n > 4 {
		t.Fatalf("the probe was woken %d times while both channels waited for their limits", n)
	}
}

// Two ordered channels whose next message waits behind one in flight to
// another consumer can give ours nothing: each takes its free slot and
// gives it back. Room given back wakes only channels that found the
// window full; here none did, so they must not wake each other (nor the
// probe standing for the consumer's other channels) over and over.
func TestBlockedOrderedChannelsDoNotWakeEachOther(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	var wakes atomic.Int64
	probe := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*WindowOpened); ok {
			wakes.Add(1)
		}
	}))
	holder := &box{deliveries: make(chan Delivery, 10), refused: make(chan error, 10)}
	hold := &Consumer{ID: 2, MsgTimeout: time.Hour, Out: holder}
	hold.SetRDY(2)
	var pids []*actor.PID
	for p := range int32(2) {
		log := sliceLog(logOf(3))
		pid := system.Root.Spawn(Props(Options{Topic: "t", Partition: p, Name: "c", Log: log, Logger: slog.New(slog.DiscardHandler)},
			storage.ChannelState{}, 120, 3))
		system.Root.Send(pid, &OrderChanged{Ordered: true})
		pids = append(pids, pid)
	}
	hold.SetChannels(slices.Clone(pids))
	for _, pid := range pids {
		system.Root.Send(pid, &Subscribed{Consumer: hold})
	}
	holder.next(t)
	holder.next(t)

	ours := &box{deliveries: make(chan Delivery, 10), refused: make(chan error, 10)}
	cons := &Consumer{ID: 1, MsgTimeout: time.Hour, Out: ours}
	cons.SetRDY(1)
	cons.SetChannels(append(slices.Clone(pids), probe))
	for _, pid := range pids {
		system.Root.Send(pid, &Subscribed{Consumer: cons})
		system.Root.Send(pid, &WindowOpened{})
	}
	for range 20 {
		for _, pid := range pids {
			if _, err := system.Root.RequestFuture(pid, &StatsRequested{}, 5*time.Second).Result(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := wakes.Load(); n > 4 {
		t.Fatalf("the probe was woken %d times while both ordered channels could deliver nothing", n)
	}
	select {
	case d := <-ours.deliveries:
		t.Fatalf("delivered %d past the message in flight to the other consumer", d.ID)
	default:
	}
}

// A leader re-sends a follower's channels their offsets whenever its
// stream reconnects: one the follower has saved already is not written
// again, a new one is. Saved through the node's batches, the answer waits
// for the state to be on disk.
func TestUnchangedOffsetIsNotSavedAgain(t *testing.T) {
	t.Run("at once", func(t *testing.T) { unchangedOffsetIsNotSavedAgain(t, nil) })
	t.Run("batched", func(t *testing.T) {
		states := storage.NewChannelStates(t.TempDir(), nil, nil, 0)
		t.Cleanup(func() {
			if err := states.Close(); err != nil {
				t.Error(err)
			}
		})
		unchangedOffsetIsNotSavedAgain(t, states)
	})
}

func unchangedOffsetIsNotSavedAgain(t *testing.T, states *storage.ChannelStates) {
	r := startChannelSaving(t, states, sliceLog(logOf(3)), time.Minute, nil)
	// What the channel's state files hold: a save rewrites one of them.
	apply := func(off, count int64) string {
		t.Helper()
		done := make(chan struct{})
		r.system.Root.Send(r.pid, &OffsetSynced{Update: OffsetUpdate{Offset: off, Count: count, Flush: true, AllowBackward: true},
			Reply: func() { close(done) }})
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the offset was never applied")
		}
		var files []byte
		for _, name := range []string{"c.state", "c.state.1"} {
			b, err := os.ReadFile(filepath.Join(r.dir, "channels", name))
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Fatal(err)
			}
			files = append(append(files, b...), '|')
		}
		return string(files)
	}
	first := apply(40, 1)
	if again := apply(40, 1); again != first {
		t.Error("the same offset was saved again")
	}
	if moved := apply(80, 2); moved == first {
		t.Error("a new offset was not saved")
	}
	st, found, err := storage.LoadChannelState(r.dir, "c")
	if err != nil || !found || st.Confirmed != 80 || st.ConfirmedCount != 2 {
		t.Errorf("saved state %+v (found %v, %v), want confirmed at 80, 2 messages", st, found, err)
	}
}

// A consumer that leaves and comes back while an ordered message is in
// flight to it (its node's leadership went away and back) gets the message
// again at once. The FIN it sent for the first delivery may arrive only
// now: it finishes the second delivery, and the FIN of the second then
// fails, which is how the consumer tells this repeat from a delivery after
// a confirmed FIN.
func TestOrderedRepeatFinishedByTheFirstDeliverysFin(t *testing.T) {
	r := startChannel(t, sliceLog(logOf(3)), time.Hour, nil, &OrderChanged{Ordered: true})
	first := r.box.next(t)
	r.system.Root.Send(r.pid, &Unsubscribed{ConsumerID: 1})
	r.system.Root.Send(r.pid, &Subscribed{Consumer: r.cons})
	again := r.box.next(t)
	if again.ID != first.ID || again.Attempts != first.Attempts+1 {
		t.Fatalf("after the consumer came back: %d (attempt %d), want %d again", again.ID, again.Attempts, first.ID)
	}
	r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: first.ID}) // the first delivery's FIN
	select {
	case u := <-r.parent.synced:
		if u.Offset != first.Offset+int64(first.Size) {
			t.Fatalf("confirmed offset %d, want %d", u.Offset, first.Offset+int64(first.Size))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first delivery's FIN was not synced")
	}
	next := r.box.next(t)
	if next.ID == first.ID {
		t.Fatalf("message %d delivered a third time after its FIN was confirmed", first.ID)
	}
	r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: again.ID}) // the repeat's FIN
	select {
	case err := <-r.box.refused:
		if !errors.Is(err, ErrNotInFlight) {
			t.Fatalf("the repeat's FIN refused with %v, want %v", err, ErrNotInFlight)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the repeat's FIN did not fail")
	}
}

// A FIN, REQ or TOUCH that reaches a channel after its consumer left (the
// partition's leadership went away as the command came) is refused on the
// consumer's connection, as nsqd refuses what it cannot apply: a consumer
// that hears nothing takes its FIN as done.
func TestCommandsOfALeftConsumerAreRefusedOnItsConnection(t *testing.T) {
	r := startChannel(t, sliceLog(logOf(1)), time.Hour, nil)
	d := r.box.next(t)
	r.system.Root.Send(r.pid, &Unsubscribed{ConsumerID: 1})
	for _, m := range []any{
		&Finished{ConsumerID: 1, ID: d.ID, Out: r.box},
		&Requeued{ConsumerID: 1, ID: d.ID, Out: r.box},
		&Touched{ConsumerID: 1, ID: d.ID, Out: r.box},
	} {
		r.system.Root.Send(r.pid, m)
		select {
		case err := <-r.box.refused:
			if !errors.Is(err, ErrNotInFlight) {
				t.Errorf("%T refused with %v, want %v", m, err, ErrNotInFlight)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%T of a consumer that left was not refused", m)
		}
	}
}

// An ordered FIN the channel took, whose offset the partition then could
// not confirm because its leadership went away, is refused on the
// consumer's connection although the consumer left meanwhile: otherwise
// it reads the message's next delivery as proof the FIN was confirmed.
func TestOrderedFinFailingAfterItsConsumerLeftIsRefused(t *testing.T) {
	r := startChannel(t, sliceLog(logOf(2)), time.Hour, nil, &OrderChanged{Ordered: true})
	r.parent.held = make(chan *OrderedFinished, 1)
	d := r.box.next(t)
	r.system.Root.Send(r.pid, &Finished{ConsumerID: 1, ID: d.ID, Out: r.box})
	var fin *OrderedFinished
	select {
	case fin = <-r.parent.held:
	case <-time.After(5 * time.Second):
		t.Fatal("the ordered FIN was not sent to the partition")
	}
	r.system.Root.Send(r.pid, &Unsubscribed{ConsumerID: 1})
	r.system.Root.Send(r.pid, &OrderedSynced{ConsumerID: fin.ConsumerID, ID: fin.ID, Out: fin.Out, Err: errors.New("not the leader")})
	select {
	case err := <-r.box.refused:
		if err.Error() != "not the leader" {
			t.Errorf("refused with %v, want the partition's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the FIN that failed after its consumer left was not refused")
	}
}
