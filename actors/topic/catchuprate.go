package topic

import (
	"sync"
	"time"
)

// TokenBucket paces bytes to Rate per second: what is taken beyond the
// tokens saved (at most Burst) is owed, and Wait is how long until the debt
// is paid. It holds no clock: the caller passes the time.
type TokenBucket struct {
	Rate   float64 // bytes per second; 0 or less: no limit
	Burst  float64 // tokens saved at most
	tokens float64
	at     time.Time
}

func (b *TokenBucket) refill(now time.Time) {
	if b.at.IsZero() {
		b.tokens, b.at = b.Burst, now
		return
	}
	if now.After(b.at) {
		b.tokens = min(b.Burst, b.tokens+now.Sub(b.at).Seconds()*b.Rate)
		b.at = now
	}
}

// Wait is how long from now until nothing is owed.
func (b *TokenBucket) Wait(now time.Time) time.Duration {
	if b.Rate <= 0 {
		return 0
	}
	b.refill(now)
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.Rate * float64(time.Second))
}

// Take spends n bytes' tokens, going into debt if need be.
func (b *TokenBucket) Take(now time.Time, n int) {
	if b.Rate <= 0 {
		return
	}
	b.refill(now)
	b.tokens -= float64(n)
}

// CatchupLimit is the token bucket a node's catch-up pushes share
// (--catchup-rate-limit), so moving or repairing many replicas reads and
// sends at most that many bytes a second in all, leaving the disk and the
// network to live writes. Partition actors reach it from their own
// goroutines, hence the lock. A nil CatchupLimit limits nothing.
type CatchupLimit struct {
	mu sync.Mutex
	b  TokenBucket
}

// NewCatchupLimit limits pushes to bytesPerSecond, with a burst of one
// chunk or one second's bytes, the smaller; 0 is no limit (nil).
func NewCatchupLimit(bytesPerSecond int64) *CatchupLimit {
	if bytesPerSecond <= 0 {
		return nil
	}
	return &CatchupLimit{b: TokenBucket{Rate: float64(bytesPerSecond), Burst: float64(min(bytesPerSecond, catchupChunkBytes))}}
}

func (l *CatchupLimit) wait(now time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Wait(now)
}

func (l *CatchupLimit) take(now time.Time, n int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Take(now, n)
}
