package broker

import (
	"sync"
	"time"

	"github.com/partitamq/partita/actors/topic"
)

// Admission decides which publishes a node takes: it bounds the messages
// taken and not yet answered, node-wide, and shrinks that bound when the
// answers show a standing queue. A partition's own queue bound
// (--max-pub-waiting) cannot see overload spread over thousands of
// partitions, each of which holds a message or two; the node's answers
// can. Past the bound a publish is refused at once with
// E_PUB_TOO_MUCH_WAITING, so an overloaded cluster answers every publish
// quickly, OK or refused, instead of taking more than it can write and
// timing it out later.
//
// The signal is CoDel's: the shortest answer latency over an interval of
// Target. A stall (an fsync, a collection) makes some answers late and
// then clears, and the answers after it are prompt again: the shortest
// stays low and nothing is refused. Only when even the quickest answer of
// an interval waited longer than Target is there a queue the node cannot
// work off, and then the bound drops to Backoff times what is pending at
// that moment, the queue that made the latency. Prompt answers grow it
// back like TCP's window: fast (doubling each round trip) up to where it
// was cut, by one message per limit's worth above, up to Max; once fifty
// intervals pass without a cut the overload is over, and it grows fast up
// to Max. An answer within a quarter of Target grows it fast whatever the
// cut: the queue is then far below one that would stand, and a limit cut
// by a burst that has passed (a failover's takeover of thousands of
// partitions) would otherwise creep back by one message a round trip for
// the fifty intervals, refusing all but a few dozen publishes at a time.
//
// It is a pure core: time comes in as arguments, and the shell
// (admissionGate) holds the lock.
type Admission struct {
	cfg AdmissionConfig

	limit float64 // messages that may be pending; between Min and Max
	// grown is the limit below which it grows fast (TCP's slow start
	// threshold): where it was last cut, or Max once no cut came for
	// calm, so a node past its overload takes a large load again within
	// a few round trips rather than one message at a time.
	grown   float64
	lastCut time.Time
	pending int // messages taken and not yet answered

	// The interval under way: when it began, how many answers it saw and
	// the shortest latency among them.
	since    time.Time
	answers  int
	shortest time.Duration

	counts AdmissionCounts
}

// AdmissionConfig are the bounds and the latency aimed for.
type AdmissionConfig struct {
	// Target is the interval, and the shortest answer latency over one
	// above which the bound shrinks; 0 keeps the bound at Max.
	Target time.Duration
	// Min and Max bound the limit, in messages; it starts at Max.
	Min, Max int
	// Backoff is the share of what is pending that the limit is cut to.
	Backoff float64
}

// calm is how many intervals without a cut end an overload. Under a
// steady overload the limit settles and cuts grow rare; ending the
// overload after a second of them let the limit double back up and
// rebuild the queue it was cut for, doubling the overload's p99.
const calm = 50

// minAnswers is how many answers an interval needs before its shortest
// latency says anything: one slow publish on an idle node is not a queue.
const minAnswers = 8

// farBelow: an answer within Target/farBelow found no queue worth probing
// carefully, and grows the limit fast.
const farBelow = 4

// AdmissionCounts are what the core did, for metrics.
type AdmissionCounts struct {
	Admitted, Refused uint64 // messages
	Cuts              uint64 // times the limit shrank
}

// NewAdmission starts with the limit at cfg.Max.
func NewAdmission(cfg AdmissionConfig) *Admission {
	if cfg.Max <= 0 {
		cfg.Max = 1
	}
	if cfg.Min <= 0 || cfg.Min > cfg.Max {
		cfg.Min = min(64, cfg.Max)
	}
	if cfg.Backoff <= 0 || cfg.Backoff >= 1 {
		cfg.Backoff = 0.8
	}
	return &Admission{cfg: cfg, limit: float64(cfg.Max), grown: float64(cfg.Max), shortest: -1}
}

// Admit takes a publish of n messages, or refuses it when it would take
// the pending messages past the limit. A node with nothing pending takes
// any publish, so an MPUB larger than the limit is written, alone.
func (a *Admission) Admit(n int) bool {
	if a.pending > 0 && a.pending+n > int(a.limit) {
		a.counts.Refused += uint64(n)
		return false
	}
	a.pending += n
	a.counts.Admitted += uint64(n)
	return true
}

// Answered: a publish of n messages taken latency ago was answered at now.
// The first answer after an interval of Target closes it: if it saw
// enough answers and even the shortest waited longer than Target, the
// limit is cut to Backoff times what was pending (at least Min, never
// up). An interval of prompt answers lets each answer grow the limit
// while the node uses at least half of it; one that is not busy does not
// grow a limit it never tests.
//
// A settling answer (topic.Reply.Settling: its write waited for a new
// leadership's followers to turn to it) says nothing of a queue when it
// is late: after a failover every partition the node took over answers
// its first writes late at once, and reading that as load would refuse
// the producers coming back just when the partitions are ready for them.
// It never cuts; a prompt one grows the limit as any other, or a node
// whose producers publish once to each of thousands of new leaderships,
// every answer settling, would never grow a limit cut before.
func (a *Admission) Answered(n int, latency time.Duration, settling bool, now time.Time) {
	pendingBefore := a.pending
	a.pending = max(a.pending-n, 0)
	if a.cfg.Target <= 0 {
		return
	}
	if !settling && a.cutOnQueue(latency, pendingBefore, now) {
		return
	}
	if !a.lastCut.IsZero() && now.Sub(a.lastCut) >= calm*a.cfg.Target {
		a.grown, a.lastCut = float64(a.cfg.Max), time.Time{}
	}
	a.grow(n, latency, pendingBefore)
}

// cutOnQueue counts an answer into the interval under way; the first
// answer after the interval closes it, and if even its shortest latency
// passed Target the limit is cut to Backoff times pendingBefore. It
// reports whether it cut.
func (a *Admission) cutOnQueue(latency time.Duration, pendingBefore int, now time.Time) bool {
	if a.shortest < 0 || latency < a.shortest {
		a.shortest = latency
	}
	a.answers++
	if a.since.IsZero() {
		a.since = now
	}
	if now.Sub(a.since) < a.cfg.Target {
		return false
	}
	queued := a.answers >= minAnswers && a.shortest > a.cfg.Target
	a.since, a.answers, a.shortest = now, 0, -1
	if queued {
		a.cutTo(float64(pendingBefore) * a.cfg.Backoff)
		a.lastCut = now
	}
	return queued
}

// grow lets a prompt answer of n messages, given while pendingBefore were
// pending, grow the limit: fast below where it was last cut or when the
// answer came far below Target, else by n per limit's worth.
func (a *Admission) grow(n int, latency time.Duration, pendingBefore int) {
	if latency > a.cfg.Target || float64(pendingBefore)*2 < a.limit {
		return
	}
	switch {
	case latency*farBelow <= a.cfg.Target:
		a.limit += float64(n)
	case a.limit < a.grown:
		a.limit = min(a.limit+float64(n), a.grown)
	default:
		a.limit += float64(n) / a.limit
	}
	a.limit = min(a.limit, float64(a.cfg.Max))
}

// cutTo lowers the limit to to, within Min and the limit itself.
func (a *Admission) cutTo(to float64) {
	next := min(max(to, float64(a.cfg.Min)), a.limit)
	if next < a.limit {
		a.limit = next
		a.counts.Cuts++
	}
	a.grown = a.limit
}

// Limit is the number of messages that may be pending now.
func (a *Admission) Limit() int { return int(a.limit) }

// Pending is the number of messages taken and not yet answered.
func (a *Admission) Pending() int { return a.pending }

// Counts are what the core did since it started.
func (a *Admission) Counts() AdmissionCounts { return a.counts }

// AdmissionState is a reading of the gate, for metrics and /stats.
type AdmissionState struct {
	Limit, Pending int
	AdmissionCounts
	// ForwardsWaiting: publishes waiting for their partition's leader (a
	// forward for one it can reach, or this node's replica to lead).
	ForwardsWaiting int
	// ForwardsQueued: forwards waiting for one of the connections to
	// their leader, all of which carry forwards.
	ForwardsQueued int
	// SentOn: publishes sent on to a partition's next leader after a
	// refusal that wrote nothing because the leadership had moved.
	SentOn int64
}

// admissionGate is Admission's shell: publishes arrive on every client's
// goroutine. A nil gate admits everything.
type admissionGate struct {
	mu   sync.Mutex
	core *Admission
}

func newAdmissionGate(cfg AdmissionConfig) *admissionGate {
	if cfg.Max <= 0 {
		return nil
	}
	return &admissionGate{core: NewAdmission(cfg)}
}

// admit takes n messages and wraps reply so that answering them gives
// them back; a refused publish is answered E_PUB_TOO_MUCH_WAITING here,
// and ok is false.
func (g *admissionGate) admit(n int, reply func(r topic.Reply)) (func(r topic.Reply), bool) {
	if g == nil {
		return reply, true
	}
	g.mu.Lock()
	ok := g.core.Admit(n)
	g.mu.Unlock()
	if !ok {
		reply(topic.Reply{Err: topic.ErrTooMuchWaiting})
		return reply, false
	}
	start := time.Now()
	return func(r topic.Reply) {
		now := time.Now()
		g.mu.Lock()
		g.core.Answered(n, now.Sub(start), r.Settling, now)
		g.mu.Unlock()
		reply(r)
	}, true
}

func (g *admissionGate) state() AdmissionState {
	if g == nil {
		return AdmissionState{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return AdmissionState{Limit: g.core.Limit(), Pending: g.core.Pending(), AdmissionCounts: g.core.Counts()}
}

// Admission reads the node's publish admission (zero when unbounded).
func (b *Broker) Admission() AdmissionState {
	s := b.admission.state()
	s.ForwardsWaiting = int(b.forwardsWaiting.Load())
	s.ForwardsQueued = int(b.inFlight.waiting.Load() + b.forwards.waiting.Load())
	s.SentOn = b.sentOn.Load()
	return s
}
