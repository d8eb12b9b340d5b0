package channel

import "time"

// Dead letters (docs/replication.md#dead-letters). A channel with
// max_attempts N delivers a message at most N times: when the Nth
// delivery is given back (REQ, timeout, its consumer gone) the message is
// not made available again but is dead. The core hands each dead message
// to the shell (DeadLetters), which publishes it to the channel's
// dead-letter topic and tells the core how that went: DeadLettered
// confirms it here, as a FIN would, DeadLetterFailed keeps it and hands
// it out again after deadLetterRetry. Until confirmed, a dead message is
// held like one in flight: it counts as outstanding, a cursor moved back
// does not queue it twice, and an ordered channel delivers nothing after
// it. A crash before the confirmation delivers it again, from the log,
// with its count started over: published twice at worst, never lost.

// deadLettersInFlight bounds the publishes of one channel's dead letters
// waiting for their answer: a consumer failing everything turns its
// backlog dead at once, and the rest wait their turn here rather than as
// thousands of concurrent publishes.
const deadLettersInFlight = 32

// deadLetterRetry is how long a dead letter whose publish failed waits
// before it is handed out again.
const deadLetterRetry = time.Second

// deadPlaces is how many dead letters' destinations a channel remembers
// for /message/get.
const deadPlaces = 256

// DeadLetter is a dead message for the shell to publish.
type DeadLetter struct {
	ID        uint64
	Offset    int64
	Timestamp int64 // its publish time, unix nanos
	Attempts  uint16
	Body      []byte
	Header    []byte // the JSON header on ext topics, nil for none
	// RequeuedAt is when its last delivery was given back (unix nanos).
	RequeuedAt int64
}

// DeadLetterPlace is where a dead letter was published.
type DeadLetterPlace struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// ID is its message ID there, 0 when the leader that wrote it did not
	// say (a publish forwarded to another node).
	ID uint64 `json:"id,omitempty"`
}

// dying is a dead message not confirmed yet.
type dying struct {
	e          *entry
	requeuedAt int64
	sending    bool  // handed to the shell, its answer not back yet
	retryAt    int64 // when a failed publish is handed out again
	failures   int   // publishes of it that failed
}

// placed remembers where one dead letter went.
type placed struct {
	offset int64
	id     uint64
	to     DeadLetterPlace
}

// SetMaxAttempts sets how many deliveries a message gets before it is
// dead; 0 delivers it for ever. It applies from the next give-back: a
// message requeued already is delivered once more.
func (c *Core) SetMaxAttempts(n uint16) { c.maxAttempts = n }

// MaxAttempts is the channel's max_attempts, 0 for none.
func (c *Core) MaxAttempts() uint16 { return c.maxAttempts }

// exhausted says whether a message given back has had its last delivery.
func (c *Core) exhausted(e *entry) bool {
	return c.maxAttempts > 0 && e.attempts >= c.maxAttempts
}

// bury takes a message given back whose deliveries are used up: dead, it
// waits for the shell to publish it.
func (c *Core) bury(e *entry, nowNs int64) {
	if c.dead == nil {
		c.dead = make(map[uint64]*dying)
	}
	d := &dying{e: e, requeuedAt: nowNs}
	c.dead[e.id] = d
	c.deadQueue = append(c.deadQueue, d)
}

// DeadLetters hands the shell the dead messages to publish now, oldest
// first, as many as deadLettersInFlight allows; each is answered with
// DeadLettered or DeadLetterFailed.
func (c *Core) DeadLetters() []DeadLetter {
	n := min(len(c.deadQueue), deadLettersInFlight-c.deadSending)
	if n <= 0 {
		return nil
	}
	out := make([]DeadLetter, n)
	for i, d := range c.deadQueue[:n] {
		d.sending = true
		e := d.e
		out[i] = DeadLetter{ID: e.id, Offset: e.offset, Timestamp: e.timestamp, Attempts: e.attempts,
			Body: e.body, Header: e.header(), RequeuedAt: d.requeuedAt}
	}
	c.deadQueue = c.deadQueue[n:]
	c.deadSending += n
	return out
}

// DeadLettered: the dead letter id is published where to says; it is
// confirmed here. It reports false for a message the channel no longer
// holds as dead (emptied meanwhile): nothing changed.
func (c *Core) DeadLettered(id uint64, to DeadLetterPlace) bool {
	d, ok := c.dead[id]
	if !ok || !d.sending {
		return false
	}
	delete(c.dead, id)
	c.deadSending--
	c.deadLetteredCount++
	e := d.e
	if len(c.places) >= deadPlaces {
		c.places = c.places[1:]
	}
	c.places = append(c.places, placed{offset: e.offset, id: e.id, to: to})
	c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
	c.advanceConfirmed()
	return true
}

// DeadLetterFailed: the dead letter id could not be published; it stays
// dead here and is handed out again after deadLetterRetry. It returns how
// many of its publishes failed so far, 0 for a message not held as dead.
func (c *Core) DeadLetterFailed(id uint64, now time.Time) int {
	d, ok := c.dead[id]
	if !ok || !d.sending {
		return 0
	}
	d.sending = false
	d.failures++
	c.deadSending--
	d.retryAt = now.Add(deadLetterRetry).UnixNano()
	// The delay is one constant, so appending keeps the list in the order
	// its retries fall due.
	c.deadRetry = append(c.deadRetry, d)
	return d.failures
}

// retryDead queues the failed dead letters whose retry is due.
func (c *Core) retryDead(nowNs int64) {
	n := 0
	for n < len(c.deadRetry) && c.deadRetry[n].retryAt <= nowNs {
		n++
	}
	if n == 0 {
		return
	}
	c.deadQueue = append(c.deadQueue, c.deadRetry[:n]...)
	c.deadRetry = c.deadRetry[n:]
}

// nextRetry is when the first failed dead letter is retried, 0 for none.
func (c *Core) nextRetry() int64 {
	if len(c.deadRetry) == 0 {
		return 0
	}
	return c.deadRetry[0].retryAt
}

// dropDead forgets the dead messages: the channel was emptied past them.
// Answers to publishes under way find nothing.
func (c *Core) dropDead() {
	c.dead, c.deadQueue, c.deadRetry, c.deadSending = nil, nil, nil, 0
}

// deadPlace is where the message at offset with this ID was dead-lettered,
// if the channel remembers.
func (c *Core) deadPlace(offset int64, id uint64) (DeadLetterPlace, bool) {
	for i := len(c.places) - 1; i >= 0; i-- {
		if p := c.places[i]; p.offset == offset && p.id == id {
			return p.to, true
		}
	}
	return DeadLetterPlace{}, false
}
