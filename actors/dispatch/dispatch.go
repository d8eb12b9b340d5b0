// Package dispatch runs actor mailboxes on goroutines that outlive one run.
//
// protoactor's default dispatcher starts a goroutine every time a mailbox
// gets messages after being empty. A partition actor's run goes deep (the
// write flow, storage, protobuf), so each new goroutine grows its stack
// from the minimum by copying, several times, thousands of times a second:
// a sixth of a replicated write's CPU in profiles. Workers here keep their
// grown stacks between runs, as grpc-go's stream workers do.
//
// They are also bounded. A burst of work for thousands of actors at once
// (every channel of a node saving, a consumer attaching to every
// partition) would otherwise become thousands of runnable goroutines, and
// Go's scheduler runs them in turn: a lease renewal or a heartbeat woken
// behind them waited seconds, and a live node lost its lease and its
// replication sessions. Past the bound, runs wait in a queue of their own,
// in order, and the goroutines the node's liveness depends on find a
// short run queue.
package dispatch

import (
	"sync"
	"sync/atomic"
	"time"
)

// Workers is an actor.Dispatcher. A mailbox run goes to an idle worker if
// one waits, else to a new goroutine while fewer than maxBusy workers run,
// else to a queue that finishing workers take runs from, in order. Idle
// workers wait for work while fewer than maxIdle do.
//
// A run that blocks (a disk stalling an fsync) holds its worker, so a
// queue that has not moved for stall gets one more worker, beyond
// maxBusy: blocked runs can slow the others but never stop them.
type Workers struct {
	throughput int
	maxIdle    int32
	maxBusy    int32 // 0: no bound, every run without an idle worker gets a goroutine
	stall      time.Duration
	idle       atomic.Int32
	busy       atomic.Int32 // workers running, or about to run, a run
	work       chan func()
	quit       chan struct{}
	stopOnce   sync.Once

	mu       sync.Mutex
	queue    []func()
	moved    time.Time // when a run last left the queue, or it became non-empty
	watching bool      // a goroutine watches the queue for stalls
}

// New makes a dispatcher that lets a mailbox handle throughput messages
// before yielding, and keeps up to maxIdle goroutines waiting for work;
// runs never wait for a worker.
func New(throughput, maxIdle int) *Workers {
	return NewBounded(throughput, maxIdle, 0, 0)
}

// NewBounded is New with at most maxBusy workers running at once, and one
// more whenever the queue of waiting runs has not moved for stall.
func NewBounded(throughput, maxIdle, maxBusy int, stall time.Duration) *Workers {
	if stall <= 0 {
		stall = 10 * time.Millisecond
	}
	return &Workers{throughput: throughput, maxIdle: int32(maxIdle), maxBusy: int32(maxBusy), stall: stall,
		work: make(chan func()), quit: make(chan struct{})}
}

func (w *Workers) Schedule(fn func()) {
	select {
	case w.work <- fn:
		return
	default:
	}
	if n := w.busy.Add(1); w.maxBusy <= 0 || n <= w.maxBusy {
		go w.run(fn)
		return
	}
	w.busy.Add(-1)
	w.enqueue(fn)
	// A worker may have gone idle between the first try and the
	// enqueue: offer it the queue.
	select {
	case w.work <- w.next:
	default:
	}
}

func (w *Workers) Throughput() int { return w.throughput }

// Idle is the number of workers waiting for a run.
func (w *Workers) Idle() int { return int(w.idle.Load()) }

// Queued is the number of runs waiting for a worker.
func (w *Workers) Queued() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

func (w *Workers) enqueue(fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		w.moved = time.Now()
	}
	w.queue = append(w.queue, fn)
	if !w.watching {
		w.watching = true
		go w.watch()
	}
}

// dequeue takes the oldest waiting run, nil when none waits.
func (w *Workers) dequeue() func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return nil
	}
	fn := w.queue[0]
	w.queue[0] = nil
	w.queue = w.queue[1:]
	if len(w.queue) == 0 {
		w.queue = nil // let the backing array go
	}
	w.moved = time.Now()
	return fn
}

// next runs the oldest waiting run, if any is left: what an idle worker
// is handed when a run was queued while it went idle.
func (w *Workers) next() {
	if fn := w.dequeue(); fn != nil {
		fn()
	}
}

// watch adds a worker whenever the queue has not moved for stall, until
// it is empty.
func (w *Workers) watch() {
	t := time.NewTicker(w.stall)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-w.quit:
			// Stopped: what is queued still runs, on a worker of its own.
			w.mu.Lock()
			w.watching = false
			w.mu.Unlock()
			w.addWorker()
			return
		}
		w.mu.Lock()
		switch {
		case len(w.queue) == 0:
			w.watching = false
			w.mu.Unlock()
			return
		case time.Since(w.moved) < w.stall:
			w.mu.Unlock()
			continue
		}
		w.mu.Unlock()
		w.addWorker()
	}
}

// addWorker starts a worker, beyond maxBusy, on the oldest waiting run.
func (w *Workers) addWorker() {
	if fn := w.dequeue(); fn != nil {
		w.busy.Add(1)
		go w.run(fn)
	}
}

func (w *Workers) run(fn func()) {
	for {
		fn()
		if next := w.dequeue(); next != nil {
			fn = next
			continue
		}
		w.busy.Add(-1)
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case fn = <-w.work:
			w.idle.Add(-1)
			w.busy.Add(1)
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// Stop ends the idle workers, and any that finish a run later: stop it
// once the actors on it are stopped. Runs scheduled after still run.
func (w *Workers) Stop() { w.stopOnce.Do(func() { close(w.quit) }) }
