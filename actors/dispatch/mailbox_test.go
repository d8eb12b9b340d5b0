package dispatch

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// manual is a dispatcher that runs nothing until the test says so, so a
// test knows on which goroutine, and when, each turn ran.
type manual struct {
	mu   sync.Mutex
	runs []func()
}

func (d *manual) Schedule(fn func()) {
	d.mu.Lock()
	d.runs = append(d.runs, fn)
	d.mu.Unlock()
}

func (d *manual) Throughput() int { return 300 }

func (d *manual) pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runs)
}

// runAll runs the scheduled turns, and those they schedule, to the end.
func (d *manual) runAll() {
	for {
		d.mu.Lock()
		if len(d.runs) == 0 {
			d.mu.Unlock()
			return
		}
		fn := d.runs[0]
		d.runs = d.runs[1:]
		d.mu.Unlock()
		fn()
	}
}

// offer is a message that carries a Here.
type offer struct {
	n    int
	here *Here
}

func (o *offer) RunsHere() *Here { return o.here }

// recorder keeps the numbers it gets, from ints and offers.
type recorder struct {
	mu  sync.Mutex
	got []int
}

func (r *recorder) Receive(ctx actor.Context) {
	n := -1
	switch m := ctx.Message().(type) {
	case int:
		n = m
	case *offer:
		n = m.n
	case string:
		panic(m)
	default:
		return
	}
	r.mu.Lock()
	r.got = append(r.got, n)
	r.mu.Unlock()
}

func (r *recorder) numbers() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.got...)
}

func spawnManual(t *testing.T, mw ...actor.MailboxMiddleware) (*actor.ActorSystem, *actor.PID, *recorder, *manual) {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	d, r := &manual{}, &recorder{}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r },
		actor.WithDispatcher(d), actor.WithMailbox(NewMailbox(mw...))))
	d.runAll() // Started
	return system, pid, r, d
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A message that offers a Here to an idle actor is handled when the sender
// calls Run, on the sender's goroutine, and no turn goes to the dispatcher.
func TestHereRunsTheTurnOnTheSendersGoroutine(t *testing.T) {
	system, pid, r, d := spawnManual(t)
	h := &Here{}
	system.Root.Send(pid, &offer{n: 1, here: h})
	if d.pending() != 0 || len(r.numbers()) != 0 {
		t.Fatalf("the offered turn went to the dispatcher (%d runs) or ran during Send (%v)", d.pending(), r.numbers())
	}
	h.Run()
	if got := r.numbers(); !equal(got, []int{1}) {
		t.Fatalf("after Run the actor has %v, want [1]", got)
	}
	h.Run() // a second Run has nothing left to do
	if got := r.numbers(); !equal(got, []int{1}) || d.pending() != 0 {
		t.Fatalf("a second Run changed something: %v, %d runs", got, d.pending())
	}
}

// An actor with a turn already due takes an offered message in that turn:
// Run does nothing, and order is kept.
func TestHereOnABusyActorWaitsForItsTurn(t *testing.T) {
	system, pid, r, d := spawnManual(t)
	system.Root.Send(pid, 1)
	h := &Here{}
	system.Root.Send(pid, &offer{n: 2, here: h})
	h.Run()
	if len(r.numbers()) != 0 {
		t.Fatalf("Run handled %v while the turn was the dispatcher's", r.numbers())
	}
	d.runAll()
	if got := r.numbers(); !equal(got, []int{1, 2}) {
		t.Fatalf("got %v, want [1 2]", got)
	}
}

// A sender's turn handles what the actor sends itself meanwhile (a flush
// after a publish), but at most maxHereTurn messages: the rest goes to the
// dispatcher, so a reader never serves other sessions' traffic for long.
func TestHereTurnIsBoundedAndHandsTheRestToTheDispatcher(t *testing.T) {
	system, pid, r, d := spawnManual(t)
	h := &Here{}
	system.Root.Send(pid, &offer{n: 0, here: h})
	for i := 1; i < maxHereTurn+10; i++ {
		system.Root.Send(pid, i)
	}
	h.Run()
	if got := r.numbers(); len(got) != maxHereTurn || got[maxHereTurn-1] != maxHereTurn-1 {
		t.Fatalf("the sender's turn handled %d messages (%v), want the first %d", len(got), got, maxHereTurn)
	}
	if d.pending() != 1 {
		t.Fatalf("%d turns scheduled for the rest, want 1", d.pending())
	}
	d.runAll()
	got := r.numbers()
	for i, n := range got {
		if n != i {
			t.Fatalf("message %d is %d", i, n)
		}
	}
	if len(got) != maxHereTurn+10 {
		t.Fatalf("%d messages handled, want %d", len(got), maxHereTurn+10)
	}
	// Idle again: the next offer runs here once more.
	h2 := &Here{}
	system.Root.Send(pid, &offer{n: 1000, here: h2})
	h2.Run()
	if got := r.numbers(); got[len(got)-1] != 1000 || d.pending() != 0 {
		t.Fatalf("got %v with %d turns scheduled, want 1000 handled here", got[len(got)-5:], d.pending())
	}
}

// flusher sends itself a flush after each offer, as a partition queues a
// group commit behind the publishes in its mailbox.
type flusher struct{ flushed int }

func (f *flusher) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *offer:
		ctx.Send(ctx.Self(), "flush")
	case string:
		f.flushed++
	}
}

func TestHereTurnHandlesWhatTheActorSendsItself(t *testing.T) {
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	d, f := &manual{}, &flusher{}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f },
		actor.WithDispatcher(d), actor.WithMailbox(NewMailbox())))
	d.runAll()
	for i := range 3 {
		h := &Here{}
		system.Root.Send(pid, &offer{n: i, here: h})
		h.Run()
		if f.flushed != i+1 || d.pending() != 0 {
			t.Fatalf("after publish %d: %d flushes handled, %d turns scheduled; want %d and 0", i, f.flushed, d.pending(), i+1)
		}
	}
}

// Without a Here, or with a nil one, messages go to the dispatcher.
func TestMessagesWithoutHereGoToTheDispatcher(t *testing.T) {
	system, pid, r, d := spawnManual(t)
	system.Root.Send(pid, &offer{n: 1})
	if d.pending() != 1 {
		t.Fatalf("%d turns scheduled, want 1", d.pending())
	}
	d.runAll()
	if got := r.numbers(); !equal(got, []int{1}) {
		t.Fatalf("got %v, want [1]", got)
	}
}

// A panic goes to the supervisor, which restarts the actor; the mailbox is
// suspended meanwhile and the messages after the panic are still handled.
func TestMailboxResumesAfterAPanicRestart(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	r := &recorder{}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return r },
		actor.WithDispatcher(New(300, 4)), actor.WithMailbox(NewMailbox())))
	system.Root.Send(pid, 1)
	system.Root.Send(pid, "boom")
	for i := 2; i <= 100; i++ {
		system.Root.Send(pid, i)
	}
	waitFor(t, "every message after the panic", func() bool { return len(r.numbers()) == 100 })
	for i, n := range r.numbers() {
		if n != i+1 {
			t.Fatalf("message %d is %d: %v", i, n, r.numbers())
		}
	}
}

type balance struct {
	mu                   sync.Mutex
	posted, got, emptied int
}

func (b *balance) MailboxStarted() {}
func (b *balance) MessagePosted(any) {
	b.mu.Lock()
	b.posted++
	b.mu.Unlock()
}
func (b *balance) MessageReceived(any) {
	b.mu.Lock()
	b.got++
	b.mu.Unlock()
}
func (b *balance) MailboxEmpty() {
	b.mu.Lock()
	b.emptied++
	b.mu.Unlock()
}

// Many senders at once, some offering a Here: each sender's messages arrive
// once and in its order, and the middlewares see every message in and out.
func TestMailboxUnderConcurrentSendersKeepsEachSendersOrder(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	const senders, each = 4, 5000
	b := &balance{}
	got := make([][]int, senders)
	var mu sync.Mutex
	done := make(chan struct{})
	total := 0
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return actor.ReceiveFunc(func(ctx actor.Context) {
			var n int
			switch m := ctx.Message().(type) {
			case int:
				n = m
			case *offer:
				n = m.n
			default:
				return
			}
			mu.Lock()
			got[n/each] = append(got[n/each], n%each)
			if total++; total == senders*each {
				close(done)
			}
			mu.Unlock()
		})
	}, actor.WithDispatcher(New(300, 4)), actor.WithMailbox(NewMailbox(b))))
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				n := s*each + i
				if s%2 == 0 {
					h := &Here{}
					system.Root.Send(pid, &offer{n: n, here: h})
					h.Run()
				} else {
					system.Root.Send(pid, n)
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("got %d of %d messages", total, senders*each)
	}
	for s, ns := range got {
		for i, n := range ns {
			if n != i {
				t.Fatalf("sender %d's message %d arrived as its %d", s, n, i)
			}
		}
	}
	waitFor(t, "the middlewares to balance", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.posted == b.got && b.emptied > 0
	})
}
