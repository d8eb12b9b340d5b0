package dispatch

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick, deadline := time.NewTicker(time.Millisecond), time.After(5*time.Second)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// Runs that overlap each get a goroutine; afterwards at most maxIdle of them
// stay, and later runs reuse them.
func TestWorkersRunEverythingAndKeepAtMostMaxIdle(t *testing.T) {
	w := New(10, 3)
	release := make(chan struct{})
	var started, done sync.WaitGroup
	for range 5 {
		started.Add(1)
		done.Add(1)
		w.Schedule(func() { started.Done(); <-release; done.Done() })
	}
	started.Wait() // five runs at once: none waited behind another
	close(release)
	done.Wait()
	waitFor(t, "three idle workers", func() bool { return w.Idle() == 3 })

	running := make(chan struct{})
	finish := make(chan struct{})
	w.Schedule(func() { close(running); <-finish })
	<-running
	if got := w.Idle(); got != 2 {
		t.Fatalf("%d idle while one worker runs, want 2: the run did not reuse a worker", got)
	}
	close(finish)
	waitFor(t, "the worker idle again", func() bool { return w.Idle() == 3 })
}

type counter struct {
	got  []int
	done chan struct{}
	want int
}

func (c *counter) Receive(ctx actor.Context) {
	if n, ok := ctx.Message().(int); ok {
		c.got = append(c.got, n)
		if len(c.got) == c.want {
			close(c.done)
		}
	}
}

// An actor on Workers gets every message once, in order.
func TestActorOnWorkersGetsMessagesInOrder(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	c := &counter{done: make(chan struct{}), want: 20000}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return c }, actor.WithDispatcher(New(300, 4))))
	for i := range c.want {
		system.Root.Send(pid, i)
	}
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("got %d of %d messages", len(c.got), c.want)
	}
	for i, n := range c.got {
		if n != i {
			t.Fatalf("message %d is %d", i, n)
		}
	}
}

// Past maxBusy, runs wait in a queue instead of each getting a goroutine,
// and start in the order they were scheduled as workers finish.
func TestBoundedWorkersQueueRunsBeyondTheBound(t *testing.T) {
	w := NewBounded(10, 4, 2, time.Hour) // no stall rescue within the test
	// The first two runs hold both workers. Only the first is released
	// before the queue drains, so one worker takes the queued runs and the
	// order they start in is the queue's, not a race between two workers.
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var mu sync.Mutex
	var order []int
	var started, done, queued sync.WaitGroup
	started.Add(2)
	queued.Add(4)
	for i := range 6 {
		done.Add(1)
		w.Schedule(func() {
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if i < 2 {
				started.Done()
				<-release[i]
			} else {
				queued.Done()
			}
			done.Done()
		})
	}
	started.Wait()
	if q := w.Queued(); q != 4 {
		t.Fatalf("%d runs queued behind two busy workers, want 4", q)
	}
	mu.Lock()
	if len(order) != 2 {
		t.Fatalf("%d runs started with a bound of 2", len(order))
	}
	mu.Unlock()
	close(release[0])
	queued.Wait()
	close(release[1])
	done.Wait()
	for i, n := range order[2:] {
		if n != i+2 {
			t.Fatalf("queued runs started in order %v, want 2 3 4 5 after the first two", order)
		}
	}
	if q := w.Queued(); q != 0 {
		t.Fatalf("%d runs still queued after all ran", q)
	}
}

// A run blocked for good does not stop those queued behind it: a queue
// that has not moved for the stall time gets another worker.
func TestBoundedWorkersRescueAStalledQueue(t *testing.T) {
	w := NewBounded(10, 4, 1, 5*time.Millisecond)
	blocked := make(chan struct{})
	defer close(blocked)
	entered := make(chan struct{})
	w.Schedule(func() { close(entered); <-blocked })
	<-entered
	ran := make(chan struct{})
	w.Schedule(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the run queued behind a blocked one never ran")
	}
}

// Runs queued when the dispatcher stops still run.
func TestBoundedWorkersRunWhatIsQueuedAfterStop(t *testing.T) {
	w := NewBounded(10, 4, 1, time.Hour)
	release := make(chan struct{})
	entered := make(chan struct{})
	w.Schedule(func() { close(entered); <-release })
	<-entered
	ran := make(chan struct{})
	w.Schedule(func() { close(ran) })
	w.Stop()
	close(release)
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("a run queued before Stop never ran")
	}
}

// seq records, in order, which actor handled each message.
type seq struct {
	mu   sync.Mutex
	log  []string
	gate chan struct{} // the busy actor's first message waits for it
	done chan struct{} // closed when the quiet actor ran
}

type busyActor struct{ s *seq }

func (a *busyActor) Receive(ctx actor.Context) {
	if n, ok := ctx.Message().(int); ok {
		if n == 0 {
			<-a.s.gate
		}
		a.s.mu.Lock()
		a.s.log = append(a.s.log, "busy")
		a.s.mu.Unlock()
	}
}

type quietActor struct{ s *seq }

func (a *quietActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(int); ok {
		a.s.mu.Lock()
		a.s.log = append(a.s.log, "quiet")
		a.s.mu.Unlock()
		close(a.s.done)
	}
}

// On a bounded dispatcher, an actor whose mailbox never runs dry hands its
// worker over after throughput messages when another actor's run waits:
// with one worker, the waiting actor runs after the busy one's first 10
// messages, not after all 1,000.
func TestBusyActorYieldsItsWorkerToAQueuedRun(t *testing.T) {
	w := NewBounded(10, 1, 1, time.Hour)
	system := actor.NewActorSystem()
	defer system.Shutdown()
	s := &seq{gate: make(chan struct{}), done: make(chan struct{})}
	props := func(a actor.Actor) *actor.Props {
		return actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(w), actor.WithMailbox(NewMailbox()))
	}
	busy := system.Root.Spawn(props(&busyActor{s}))
	quiet := system.Root.Spawn(props(&quietActor{s}))
	for i := range 1000 {
		system.Root.Send(busy, i)
	}
	system.Root.Send(quiet, 1) // queued: the only worker is the busy actor's
	close(s.gate)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the queued actor never ran")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := 0
	for i, who := range s.log {
		if who == "quiet" {
			at = i
		}
	}
	if at > 10 {
		t.Fatalf("the queued actor ran after %d of the busy actor's messages, want at most 10", at)
	}
}
