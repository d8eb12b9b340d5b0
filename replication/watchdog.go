package replication

import (
	"sync"
	"sync/atomic"
	"time"
)

// watchdog calls onSilent once when touch has not been called for limit.
// touch is a single atomic store because it runs for every frame received;
// the deadline is checked on a timer, so no goroutine waits meanwhile.
type watchdog struct {
	limit    time.Duration
	start    time.Time
	last     atomic.Int64 // time.Since(start) at the latest touch
	onSilent func(idle time.Duration)

	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
}

func startWatchdog(limit time.Duration, onSilent func(idle time.Duration)) *watchdog {
	w := &watchdog{limit: limit, start: time.Now(), onSilent: onSilent}
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
