// Package channel is the channel actor: a cursor over a partition's committed
// log that hands messages to consumers by their RDY window, tracks what is in
// flight, requeues and defers, and persists how far the channel has confirmed.
package channel

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/partitamq/partita/storage"
)

// Core is the pure state of one channel on one partition: no goroutines,
// clocks or files. The actor shell reads the log where Core asks, feeds it
// what it read, and performs what it answers.
type Core struct {
	cfg Config

	confirmed      int64 // every message below this offset is FINished
	confirmedCount int64
	fins           intervals // FINished ranges beyond confirmed

	cursor      int64 // next log offset to read
	cursorCount int64 // messages read (or skipped) so far
	end         int64 // committed end announced by the partition
	endCount    int64

	ready    []*entry // read from the log, never delivered
	requeued []*entry // back from a consumer or a timeout; delivered first
	deferred deadlineHeap
	moving   map[uint64]*entry // REQ'd with a long delay, copy being written
	parked   deadlineHeap      // log messages due far ahead, without bodies (parked.go)
	unparked []*entry          // parked messages due, waiting for their bodies
	inflight map[uint64]*entry
	timeouts deadlineHeap

	paused  bool
	ordered bool      // one message in flight at a time, FINs confirmed on every ISR member
	skipped bool      // everything is dropped as it arrives (SetSkipped)
	rate    rateLimit // bytes delivered a second (ratelimit.go)

	clientLimits []ClientLimit // RDY caps by client prefix (clientlimit.go)

	// Dead letters (dead.go): maxAttempts deliveries at most, 0 for no
	// bound; dead holds every dead message not confirmed yet, deadQueue
	// those to hand to the shell, deadRetry those whose publish failed.
	maxAttempts uint16
	dead        map[uint64]*dying
	deadQueue   []*dying
	deadRetry   []*dying
	deadSending int
	places      []placed // where the last dead letters went

	// selectors are the consumers that desire a tag or filter (select.go);
	// tags counts them by tag. Both are empty on most channels.
	selectors map[int64]Selector
	tags      map[string]int
	filtered  int64 // messages confirmed undelivered by a filter

	// cached is a leader's offset beyond this follower's data, applied
	// once the data arrives.
	cached *OffsetUpdate

	messageCount int64
	requeueCount int64
	timeoutCount int64
	rateLimited  int64 // times delivery waited for the rate limit

	deadLetteredCount int64

	deferredEmptied int64 // deferred messages dropped by EmptyDeferred
}

// Config bounds what a channel holds in memory.
type Config struct {
	MaxReadAhead   int           // messages read from the log and waiting for a consumer
	MaxOutstanding int           // unconfirmed messages held (in flight, deferred, FIN gaps) before reading pauses
	MaxMsgTimeout  time.Duration // TOUCH never extends past delivery + this
	// Name is the channel's name, which delayed copies in the log carry.
	Name string
	// ReqToEndThreshold: a REQ delayed longer goes to the log as a delayed
	// copy (delayed.go); 0 keeps every delay in memory (ephemeral channels).
	ReqToEndThreshold time.Duration
	// E2EQuantiles, when any, are the quantiles of the end-to-end
	// processing latency (publish to FIN) the channel estimates over
	// E2EWindow (e2e.go).
	E2EQuantiles []float64
	E2EWindow    time.Duration
}

// Delivery is one message handed to a consumer.
type Delivery struct {
	ID        uint64
	Timestamp int64
	// Offset and Size place the message in the log, for the consumers
	// whose frames carry them (youzan's ordered and traced ones).
	Offset   int64
	Size     int32
	Attempts uint16
	Body     []byte
	// Ext is the message's header, nil for none: one pointer, so that
	// plain messages, nearly all of them, pay a word for it and not a
	// slice.
	Ext *Ext
}

// Ext is what a message of an ext topic carries beside its body. It is
// never changed once made, so deliveries share it with the channel.
type Ext struct {
	Header []byte // the JSON header
	Tag    string // its dispatch tag
}

// Header is the delivery's JSON header, nil for none.
func (d *Delivery) Header() []byte {
	if d.Ext == nil {
		return nil
	}
	return d.Ext.Header
}

// Errors for FIN, REQ and TOUCH; nsqd answers them non-fatally.
var (
	ErrNotInFlight = errors.New("ID not in flight")
	ErrNotOwner    = errors.New("client does not own message")
)

type entry struct {
	id        uint64
	offset    int64
	timestamp int64
	size      int32
	attempts  uint16
	body      []byte
	ext       *Ext // nil unless the message has a header (ext topics)

	consumer    int64
	deliveredAt int64 // unix nanos
	due         int64 // unix nanos: timeout while in flight, delivery time while deferred
	heapIndex   int
}

// NewCore starts a channel at a persisted state over a log committed up to
// end (endCount messages).
func NewCore(cfg Config, st storage.ChannelState, end, endCount int64) *Core {
	if cfg.MaxReadAhead <= 0 {
		cfg.MaxReadAhead = 1024
	}
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = 20000
	}
	c := &Core{
		cfg:            cfg,
		confirmed:      st.Confirmed,
		confirmedCount: st.ConfirmedCount,
		cursor:         st.Confirmed,
		cursorCount:    st.ConfirmedCount,
		end:            end,
		endCount:       endCount,
		inflight:       make(map[uint64]*entry),
		paused:         st.Paused,
	}
	for _, iv := range st.Intervals {
		if iv.End > iv.Start && iv.Start >= c.confirmed {
			c.fins.add(interval{start: iv.Start, end: iv.End, count: iv.Count})
		}
	}
	c.advanceConfirmed()
	return c
}

// CommittedTo moves the readable end forward.
func (c *Core) CommittedTo(end, count int64) {
	if end > c.end {
		c.end, c.endCount = end, count
	}
	if c.skipped {
		c.confirmed, c.confirmedCount = c.end, c.endCount
		c.cursor, c.cursorCount = c.end, c.endCount
	}
	if c.cached != nil && c.cached.Offset <= c.end {
		u := *c.cached
		c.cached = nil
		c.ApplyOffset(u)
	}
}

// TruncatedTo moves the readable end back: a follower cut a diverged tail.
// A position past the cut moves back to it; the leader's next offset update
// puts it where the leader's channel is.
func (c *Core) TruncatedTo(end, count int64) {
	// An offset kept for data not here yet named a position in the log
	// that was cut: in the log that replaces it, it may fall anywhere.
	c.cached = nil
	if end >= c.end {
		return
	}
	c.end, c.endCount = end, count
	if c.confirmed > end {
		c.confirmed, c.confirmedCount = end, count
	}
	c.fins.dropPast(end)
	c.ready, c.requeued, c.deferred = nil, nil, nil
	c.dropParked()
	c.cursor, c.cursorCount = c.confirmed, c.confirmedCount
}

// ResetTo puts the channel at start of a log that restarted there: a
// follower's full sync. The leader's next offset update moves it on.
func (c *Core) ResetTo(start, count int64) {
	c.cached = nil
	c.ready, c.requeued, c.deferred = nil, nil, nil
	c.dropParked()
	c.end, c.endCount = start, count
	c.confirmed, c.confirmedCount = start, count
	c.fins = intervals{}
	c.cursor, c.cursorCount = start, count
}

// WantRead says which log range the shell should read next, if any.
func (c *Core) WantRead() (from, to int64, ok bool) {
	if c.cursor >= c.end || len(c.ready) >= c.cfg.MaxReadAhead || c.outstanding() >= c.cfg.MaxOutstanding {
		return 0, 0, false
	}
	return c.cursor, c.end, true
}

func (c *Core) outstanding() int {
	return len(c.inflight) + c.deferred.Len() + len(c.moving) + len(c.unparked) + len(c.requeued) + c.fins.len() + len(c.dead)
}

// Loaded takes messages the shell read at the cursor. Messages already
// FINished (before a restart, or while the cursor was put back before them)
// are confirmed without being delivered again; deferred ones wait for
// their time.
func (c *Core) Loaded(msgs []storage.StoredMessage, now time.Time) {
	for i := range msgs {
		m := &msgs[i]
		if m.Offset != c.cursor {
			return // a read from a stale position; the shell reads again
		}
		c.cursor += int64(m.Size)
		c.cursorCount++
		// Before the confirmed offset: a follower's report put the cursor
		// back while the message was in flight, and its FIN confirmed it.
		if m.Offset < c.confirmed || c.fins.covers(m.Offset) {
			continue
		}
		if c.held(m.ID) {
			continue // in flight since before a move of the cursor
		}
		if c.skipsDelayedCopy(m) {
			c.fins.add(interval{start: m.Offset, end: m.Offset + int64(m.Size), count: 1})
			c.advanceConfirmed()
			continue
		}
		e := &entry{
			id:        m.ID,
			offset:    m.Offset,
			size:      m.Size,
			timestamp: m.Timestamp,
			attempts:  m.DelayedAttempts,
			heapIndex: -1,
		}
		c.messageCount++
		if c.parks(m.DeliverAt, now) {
			e.due = m.DeliverAt
			heap.Push(&c.parked, e)
			continue
		}
		e.body = append([]byte(nil), m.Body...)
		e.setHeader(m.Header)
		if m.DeliverAt > now.UnixNano() {
			e.due = m.DeliverAt
			heap.Push(&c.deferred, e)
			continue
		}
		c.ready = append(c.ready, e)
	}
}

// Available is how many messages could be delivered now.
func (c *Core) Available() int {
	if c.paused {
		return 0
	}
	return len(c.requeued) + len(c.ready)
}

// Take hands up to n messages to a consumer, putting them in flight until
// now+timeout.
func (c *Core) Take(consumer int64, n int, now time.Time, timeout time.Duration) []Delivery {
	if c.ordered {
		// A dead message waiting for its publish is still first.
		n = min(n, 1-len(c.inflight)-len(c.dead))
	}
	if c.paused || n <= 0 {
		return nil
	}
	if len(c.selectors) > 0 {
		return c.takeSelected(consumer, n, now, timeout)
	}
	out := make([]Delivery, 0, min(n, c.Available()))
	nowNs, dueNs := now.UnixNano(), now.Add(timeout).UnixNano()
	for len(out) < n {
		q := &c.ready
		switch {
		case len(c.requeued) > 0:
			q = &c.requeued
		case len(c.ready) == 0:
			return out
		}
		e := (*q)[0]
		if !c.mayDeliver(e, nowNs) {
			return out
		}
		*q = (*q)[1:]
		out = append(out, c.deliver(e, consumer, nowNs, dueNs))
	}
	return out
}

// deliver puts e in flight to consumer until dueNs.
func (c *Core) deliver(e *entry, consumer, nowNs, dueNs int64) Delivery {
	if e.attempts < math.MaxUint16 {
		// The wire field is 16 bits; it saturates rather than wrapping
		// to 0, so a client's max-attempts check still fires.
		e.attempts++
	}
	e.consumer = consumer
	e.deliveredAt = nowNs
	e.due = dueNs
	c.inflight[e.id] = e
	heap.Push(&c.timeouts, e)
	c.spent(e)
	return Delivery{ID: e.id, Timestamp: e.timestamp, Offset: e.offset, Size: e.size, Attempts: e.attempts, Body: e.body, Ext: e.ext}
}

// setHeader keeps a copy of a message's header: what the log reader
// returned aliases its buffer. Messages without one allocate nothing.
func (e *entry) setHeader(h []byte) {
	if len(h) > 0 {
		e.ext = &Ext{Header: append([]byte(nil), h...), Tag: messageTag(h)}
	}
}

// held says whether a message is in flight or being moved to the log: a
// cursor moved back reads it again, and it must not be queued twice.
func (c *Core) held(id uint64) bool {
	_, inflight := c.inflight[id]
	_, moving := c.moving[id]
	_, dead := c.dead[id]
	return inflight || moving || dead
}

func (c *Core) owned(consumer int64, id uint64) (*entry, error) {
	e, ok := c.inflight[id]
	if !ok {
		return nil, ErrNotInFlight
	}
	if e.consumer != consumer {
		return nil, ErrNotOwner
	}
	return e, nil
}

func (c *Core) takeBack(e *entry) {
	delete(c.inflight, e.id)
	heap.Remove(&c.timeouts, e.heapIndex)
}

// Timestamp is the publish time (unix nanos) of a message in flight to
// consumer.
func (c *Core) Timestamp(consumer int64, id uint64) (int64, bool) {
	e, err := c.owned(consumer, id)
	if err != nil {
		return 0, false
	}
	return e.timestamp, true
}

// Fin finishes a message: it is confirmed and never delivered again.
func (c *Core) Fin(consumer int64, id uint64) error {
	e, err := c.owned(consumer, id)
	if err != nil {
		return err
	}
	c.takeBack(e)
	c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
	c.advanceConfirmed()
	return nil
}

// Holder is the consumer a message is in flight to.
func (c *Core) Holder(id uint64) (int64, bool) {
	e, ok := c.inflight[id]
	if !ok {
		return 0, false
	}
	return e.consumer, true
}

// FinWaiting finishes a message waiting for its next delivery (requeued,
// or read ahead and not yet delivered), as an operator does to a message
// no consumer can handle (youzan's /message/finish); one in flight is
// finished for its consumer with Fin. ErrNotInFlight when no such
// message waits.
func (c *Core) FinWaiting(id uint64) error {
	for _, q := range []*[]*entry{&c.requeued, &c.ready} {
		if i := slices.IndexFunc(*q, func(e *entry) bool { return e.id == id }); i >= 0 {
			e := (*q)[i]
			*q = slices.Delete(*q, i, i+1)
			c.fins.add(interval{start: e.offset, end: e.offset + int64(e.size), count: 1})
			c.advanceConfirmed()
			return nil
		}
	}
	return ErrNotInFlight
}

// Req gives a message back: at once for delay 0, else after delay; a
// message that had its last delivery is dead instead (dead.go).
func (c *Core) Req(consumer int64, id uint64, delay time.Duration, now time.Time) error {
	e, err := c.owned(consumer, id)
	if err != nil {
		return err
	}
	c.takeBack(e)
	c.requeueCount++
	if !c.wanted(e) {
		return nil
	}
	if c.exhausted(e) {
		c.bury(e, now.UnixNano())
		return nil
	}
	if delay <= 0 || c.ordered {
		// An ordered channel never defers: the message must stay first.
		c.requeued = append(c.requeued, e)
		return nil
	}
	e.due = now.Add(delay).UnixNano()
	heap.Push(&c.deferred, e)
	return nil
}

// Gone gives back every message in flight to a consumer that unsubscribed,
// ahead of the others waiting, and returns how many: its connection may
// live on (its SUB followed the partition's leadership to another node),
// and the messages would otherwise hold slots of its window until they
// timed out. A FIN of one that arrives later is refused; the message is
// delivered again, as at-least-once allows, or is dead when that was its
// last delivery.
func (c *Core) Gone(consumer int64, now time.Time) int {
	var back []*entry
	for _, e := range c.inflight {
		if e.consumer == consumer {
			back = append(back, e)
		}
	}
	slices.SortFunc(back, func(x, y *entry) int { return cmp.Compare(x.offset, y.offset) })
	again := back[:0:0]
	for _, e := range back {
		c.takeBack(e)
		switch {
		case !c.wanted(e):
		case c.exhausted(e):
			c.bury(e, now.UnixNano())
		default:
			again = append(again, e)
		}
	}
	c.requeued = append(again, c.requeued...)
	return len(back)
}

// wanted says whether a message given back from flight (timed out,
// REQ'd, its consumer gone) is to be delivered again from memory. A
// setoffset may have moved the channel since it was delivered: past it,
// where it counts as confirmed, or back before it, where the cursor reads
// it again from the log; queued then as well, it would go out twice.
func (c *Core) wanted(e *entry) bool {
	return e.offset >= c.confirmed && e.offset < c.cursor && !c.fins.covers(e.offset)
}

// Touch resets a message's timeout, never past delivery + MaxMsgTimeout.
func (c *Core) Touch(consumer int64, id uint64, now time.Time, timeout time.Duration) error {
	e, err := c.owned(consumer, id)
	if err != nil {
		return err
	}
	due := now.Add(timeout).UnixNano()
	if c.cfg.MaxMsgTimeout > 0 {
		due = min(due, e.deliveredAt+int64(c.cfg.MaxMsgTimeout))
	}
	e.due = due
	heap.Fix(&c.timeouts, e.heapIndex)
	return nil
}

// Tick requeues timed-out messages (or makes them dead after their last
// delivery), releases deferred ones that are due and queues again the dead
// letters whose retry is due. It returns, per consumer, how many of its
// in-flight messages timed out.
func (c *Core) Tick(now time.Time) map[int64]int {
	var released map[int64]int
	nowNs := now.UnixNano()
	for c.timeouts.Len() > 0 && c.timeouts[0].due <= nowNs {
		e := heap.Pop(&c.timeouts).(*entry)
		delete(c.inflight, e.id)
		c.timeoutCount++
		if released == nil {
			released = make(map[int64]int)
		}
		released[e.consumer]++
		switch {
		case !c.wanted(e):
		case c.exhausted(e):
			c.bury(e, nowNs)
		default:
			c.requeued = append(c.requeued, e)
		}
	}
	c.retryDead(nowNs)
	for c.deferred.Len() > 0 && c.deferred[0].due <= nowNs {
		e := heap.Pop(&c.deferred).(*entry)
		c.requeued = append(c.requeued, e)
	}
	c.unpark(nowNs)
	return released
}

// NextDue is the earliest timeout, deferred delivery or end of a wait for
// the rate limit, zero if none.
func (c *Core) NextDue() time.Time {
	t := c.rateDue()
	if c.timeouts.Len() > 0 && (t == 0 || c.timeouts[0].due < t) {
		t = c.timeouts[0].due
	}
	for _, h := range []deadlineHeap{c.deferred, c.parked} {
		if h.Len() > 0 && (t == 0 || h[0].due < t) {
			t = h[0].due
		}
	}
	if r := c.nextRetry(); r != 0 && (t == 0 || r < t) {
		t = r
	}
	if t == 0 {
		return time.Time{}
	}
	return time.Unix(0, t)
}

// Empty drops everything queued, deferred and in flight, confirming the log
// up to its committed end. It returns each consumer's dropped in-flight count.
func (c *Core) Empty() map[int64]int {
	released := make(map[int64]int)
	for _, e := range c.inflight {
		released[e.consumer]++
	}
	c.inflight = make(map[uint64]*entry)
	c.timeouts, c.deferred = nil, nil
	c.ready, c.requeued = nil, nil
	c.dropParked()
	c.dropDead()
	c.fins = intervals{}
	c.confirmed, c.confirmedCount = c.end, c.endCount
	c.cursor, c.cursorCount = c.end, c.endCount
	return released
}

// SetOrdered switches ordered delivery on or off.
func (c *Core) SetOrdered(o bool) { c.ordered = o }

// Ordered reports whether the channel delivers in order.
func (c *Core) Ordered() bool { return c.ordered }

// SetSkipped starts or ends skipping: a skipped channel drops what it
// holds (as Empty, whose counts it returns) and then every message as it
// is committed, delivering nothing; unskipped, it delivers what comes
// after. youzan's /channel/skip, for a consumer group that must not fall
// behind while it does not consume.
func (c *Core) SetSkipped(s bool) map[int64]int {
	c.skipped = s
	if !s {
		return nil
	}
	return c.Empty()
}

// Skipped reports whether the channel drops what arrives.
func (c *Core) Skipped() bool { return c.skipped }

// SetPaused stops or resumes delivery.
func (c *Core) SetPaused(p bool) { c.paused = p }

// Paused reports whether delivery is stopped.
func (c *Core) Paused() bool { return c.paused }

func (c *Core) advanceConfirmed() {
	for c.fins.len() > 0 && c.fins.first().start <= c.confirmed {
		iv := c.fins.popFirst()
		if iv.end > c.confirmed {
			c.confirmed = iv.end
			c.confirmedCount += iv.count
		}
	}
}

// Confirmed is the confirmed offset, without State's copy of the FINished
// ranges.
func (c *Core) Confirmed() int64 { return c.confirmed }

// State is what survives a restart: the confirmed offset and the FINished
// ranges beyond it.
func (c *Core) State() storage.ChannelState {
	st := storage.ChannelState{Confirmed: c.confirmed, ConfirmedCount: c.confirmedCount, Paused: c.paused}
	for _, iv := range c.fins.items {
		st.Intervals = append(st.Intervals, storage.Interval{Start: iv.start, End: iv.end, Count: iv.count})
	}
	return st
}

// Stats are the channel's nsqd-style counters.
type Stats struct {
	Depth        int64
	InFlight     int
	Deferred     int
	MessageCount int64
	RequeueCount int64
	TimeoutCount int64
	Paused       bool
	Skipped      bool
	RateLimitKB  int64 // delivery limit in KB a second, 0 for none
	RateLimited  int64 // times delivery waited for the rate limit
	ClientLimits []ClientLimit
	// DeadLettered counts the messages published to the dead-letter
	// topic and confirmed here; DeadLettering those dead and not yet
	// confirmed (their publish under way, or failed and to be retried).
	DeadLettered  int64
	DeadLettering int
	MaxAttempts   uint16
	// DeferredEmptied counts the deferred messages dropped by
	// EmptyDeferred (youzan's /channel/emptydelayed).
	DeferredEmptied int64
	Confirmed       int64
	ConfirmedCount  int64
	End             int64
	EndCount        int64 // messages committed to the partition
}

// Stats reports depth as nsqd does: messages waiting for delivery, whether
// still in the log or already read ahead or requeued.
func (c *Core) Stats() Stats {
	return Stats{
		Depth:           c.endCount - c.cursorCount + int64(len(c.ready)+len(c.requeued)),
		InFlight:        len(c.inflight),
		Deferred:        c.deferred.Len() + len(c.moving) + c.parked.Len() + len(c.unparked),
		MessageCount:    c.messageCount + (c.endCount - c.cursorCount),
		RequeueCount:    c.requeueCount,
		TimeoutCount:    c.timeoutCount,
		Paused:          c.paused,
		Skipped:         c.skipped,
		RateLimitKB:     c.RateLimit(),
		RateLimited:     c.rateLimited,
		ClientLimits:    c.clientLimits,
		DeadLettered:    c.deadLetteredCount,
		DeadLettering:   len(c.dead),
		MaxAttempts:     c.maxAttempts,
		DeferredEmptied: c.deferredEmptied,
		Confirmed:       c.confirmed,
		ConfirmedCount:  c.confirmedCount,
		End:             c.end,
		EndCount:        c.endCount,
	}
}

// OffsetUpdate is a leader's confirmed position for this channel.
type OffsetUpdate struct {
	Offset, Count    int64
	Flush            bool // clamp to this replica's end rather than ignore an offset beyond it
	AllowBackward    bool
	Intervals        []storage.Interval
	ReplaceIntervals bool
}

// ApplyOffset moves a follower's channel to the leader's confirmed offset
// (docs/replication.md#follower-offset-apply). An offset beyond the data
// this replica has is clamped to its end when Flush is set, and otherwise
// kept until the data arrives; without AllowBackward the channel only moves
// forward. It reports whether the channel moved.
func (c *Core) ApplyOffset(u OffsetUpdate) bool {
	if u.Offset > c.end {
		if !u.Flush {
			if c.cached == nil || u.Offset > c.cached.Offset {
				c.cached = &u
			}
			return false
		}
		u.Offset, u.Count, u.Intervals = c.end, c.endCount, nil
	}
	if u.Offset < c.confirmed && !u.AllowBackward {
		return false
	}
	c.confirmed, c.confirmedCount = u.Offset, u.Count
	if u.ReplaceIntervals {
		c.fins = intervals{}
		for _, iv := range u.Intervals {
			if iv.Start >= c.confirmed && iv.End > iv.Start && iv.End <= c.end {
				c.fins.add(interval{start: iv.Start, end: iv.End, count: iv.Count})
			}
		}
	} else {
		for c.fins.len() > 0 && c.fins.first().end <= c.confirmed {
			c.fins.popFirst()
		}
	}
	// A follower delivers nothing; what it read ahead (deferred messages
	// too) is read again from the new position if it ever leads.
	c.ready, c.requeued, c.deferred = nil, nil, nil
	c.dropParked()
	c.cursor, c.cursorCount = c.confirmed, c.confirmedCount
	return true
}

func (e *entry) header() []byte {
	if e.ext == nil {
		return nil
	}
	return e.ext.Header
}

func (e *entry) tag() string {
	if e.ext == nil {
		return ""
	}
	return e.ext.Tag
}
