package replication

import (
	"sync"
	"sync/atomic"
	"time"
)

// watchdog calls onSilent once when touch has not been called for limit.
// touch is a single atomic store because it runs for every frame received;
// the deadline is checked on a timer, so no goroutine waits meanwhile.
//
// Silence must be the peer's, not the reader's: on a machine whose cores
// are saturated the goroutine reading the socket can wait in the run
// queue longer than limit while the timer still fires on time. So before
// it calls the peer silent the watchdog asks unread whether bytes wait in
// the socket; if any do, the peer spoke and the deadline starts again.
type watchdog struct {
	limit    time.Duration
	start    time.Time
	last     atomic.Int64 // time.Since(start) at the latest touch
	onSilent func(idle time.Duration)
	unread   func() bool // nil: nothing to ask

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func startWatchdog(limit time.Duration, unread func() bool, onSilent func(idle time.Duration)) *watchdog {
	w := &watchdog{limit: limit, start: time.Now(), onSilent: onSilent, unread: unread}
	w.mu.Lock()
	w.timer = time.AfterFunc(limit, w.check)
	w.mu.Unlock()
	return w
}

func (w *watchdog) touch() { w.last.Store(int64(time.Since(w.start))) }

func (w *watchdog) check() {
	idle := time.Since(w.start) - time.Duration(w.last.Load())
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	if idle >= w.limit && w.unread != nil && w.unread() {
		w.touch()
		idle = 0
	}
	if idle < w.limit {
		w.timer.Reset(w.limit - idle)
		w.mu.Unlock()
		return
	}
	w.stopped = true
	w.mu.Unlock()
	w.onSilent(idle)
}

func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.timer.Stop()
	w.mu.Unlock()
}
