package channel

import (
	"math"
	"time"
)

// youzan's per-channel delivery rate limit (/channel/ratelimit): a token
// bucket of bytes, counted with the time the shell passes in. A delivery
// spends its body and header, and waits until the bucket holds that much;
// a message larger than the bucket goes out when it is full, leaving a
// debt that holds the next back until it is paid. While a message waits,
// NextDue names the moment the bucket holds enough, and the shell's timer
// delivers then.

// rateBurst is how many seconds' worth a limited channel may send at once
// after being idle, as youzan's limiter allows (a burst of four times the
// rate).
const rateBurst = 4

// maxRateLimitKB bounds a limit (a petabyte a second, more than any
// channel delivers): past it the bucket's bytes would wrap negative.
const maxRateLimitKB = 1 << 40

type rateLimit struct {
	perSec  int64   // bytes a second; 0 when the channel is not limited
	tokens  float64 // bytes that may go out; below zero after a large message
	at      int64   // unix nanos the tokens were counted at
	waiting bool    // a message waits for need tokens
	need    float64
}

func (r *rateLimit) burst() float64 { return float64(r.perSec * rateBurst) }

// refill counts the tokens gained since they were last counted.
func (r *rateLimit) refill(nowNs int64) {
	if nowNs <= r.at {
		return
	}
	gained := float64(nowNs-r.at) * float64(r.perSec) / float64(time.Second)
	r.tokens = min(r.burst(), r.tokens+gained)
	r.at = nowNs
}

// nextAt is when the bucket holds what the waiting message needs, 0 when
// none waits.
func (r *rateLimit) nextAt() int64 {
	if !r.waiting {
		return 0
	}
	return r.at + int64(math.Ceil((r.need-r.tokens)*float64(time.Second)/float64(r.perSec)))
}

// SetRateLimit limits delivery to kbPerSec kilobytes (of 1024 bytes) a
// second, 0 lifting the limit. A new limit starts with a full bucket; the
// same limit again changes nothing, so a repeated announcement of it (the
// metadata's watch) does not refill the bucket.
func (c *Core) SetRateLimit(kbPerSec int64, now time.Time) {
	perSec := min(max(kbPerSec, 0), maxRateLimitKB) * 1024
	if perSec == c.rate.perSec {
		return
	}
	c.rate = rateLimit{perSec: perSec, at: now.UnixNano()}
	c.rate.tokens = c.rate.burst()
}

// RateLimit is the delivery limit in kilobytes a second, 0 for none.
func (c *Core) RateLimit() int64 { return c.rate.perSec / 1024 }

// mayDeliver says whether the rate limit lets e go out now; each wait it
// imposes is counted once (Stats.RateLimited).
func (c *Core) mayDeliver(e *entry, nowNs int64) bool {
	r := &c.rate
	if r.perSec == 0 {
		return true
	}
	r.refill(nowNs)
	need := min(float64(e.cost()), r.burst())
	if r.tokens >= need {
		r.waiting = false
		return true
	}
	if !r.waiting {
		c.rateLimited++
	}
	r.waiting, r.need = true, need
	return false
}

// RateHeld says whether the rate limit holds back the next message now,
// counting the wait as Take would. The shell asks before it takes room in
// a consumer's window: room taken and given back wakes the consumer's
// other channels, and channels held back alike would wake each other for
// as long as the wait lasts.
func (c *Core) RateHeld(now time.Time) bool {
	if c.rate.perSec == 0 || c.Available() == 0 {
		return false
	}
	e := c.ready[0]
	if len(c.requeued) > 0 {
		e = c.requeued[0]
	}
	return !c.mayDeliver(e, now.UnixNano())
}

// spent takes a delivered message's bytes from the bucket.
func (c *Core) spent(e *entry) {
	if c.rate.perSec > 0 {
		c.rate.tokens -= float64(e.cost())
	}
}

// cost is what a delivery of e spends of the rate limit.
func (e *entry) cost() int { return len(e.body) + len(e.header()) }

// rateDue is when the rate limit lets a waiting message go out, 0 when
// nothing waits for it.
func (c *Core) rateDue() int64 {
	if c.Available() == 0 {
		return 0
	}
	return c.rate.nextAt()
}
