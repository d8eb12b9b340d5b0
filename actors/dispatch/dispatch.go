// Package dispatch runs actor mailboxes on goroutines that outlive one run.
//
// protoactor's default dispatcher starts a goroutine every time a mailbox
// gets messages after being empty. A partition actor's run goes deep (the
// write flow, storage, protobuf), so each new goroutine grows its stack
// from the minimum by copying, several times, thousands of times a second:
// a sixth of a replicated write's CPU in profiles. Workers here keep their
// grown stacks between runs, as grpc-go's stream workers do.
package dispatch

import (
	"sync"
	"sync/atomic"
)

// Workers is an actor.Dispatcher. A mailbox run goes to an idle worker if
// one waits, else to a new goroutine, which then waits as a worker while
// fewer than maxIdle do; so it never queues a run behind another.
type Workers struct {
	throughput int
	maxIdle    int32
	idle       atomic.Int32
	work       chan func()
	quit       chan struct{}
	stopOnce   sync.Once
}

// New makes a dispatcher that lets a mailbox handle throughput messages
// before yielding, and keeps up to maxIdle goroutines waiting for work.
func New(throughput, maxIdle int) *Workers {
	return &Workers{throughput: throughput, maxIdle: int32(maxIdle), work: make(chan func()), quit: make(chan struct{})}
}

func (w *Workers) Schedule(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.run(fn)
	}
}

func (w *Workers) Throughput() int { return w.throughput }

// Idle is the number of workers waiting for a run.
func (w *Workers) Idle() int { return int(w.idle.Load()) }

func (w *Workers) run(fn func()) {
	for {
		fn()
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case fn = <-w.work:
			w.idle.Add(-1)
		case <-w.quit:
			w.idle.Add(-1)
			return
		}
	}
}

// Stop ends the idle workers, and any that finish a run later: stop it
// once the actors on it are stopped. Runs scheduled after still run.
func (w *Workers) Stop() { w.stopOnce.Do(func() { close(w.quit) }) }
