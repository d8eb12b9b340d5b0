package broker

import (
	"sync"
	"time"

	"github.com/partitamq/partita/actors/topic"
)

// Admission decides which publishes a node takes: it bounds the messages
// taken and not yet answered, node-wide, and moves that bound with the
// latency of the answers (additive increase, multiplicative decrease, as
// TCP's congestion window and Netflix's concurrency limits do). A
// partition's own queue bound (--max-pub-waiting) cannot see overload
// spread over thousands of partitions, each of which holds a message or
// two; the node's answers can. Past the bound a publish is refused at once
// with E_PUB_TOO_MUCH_WAITING, so an overloaded cluster answers every
// publish quickly, OK or refused, instead of taking more than it can
// write and timing it out later.
//
// It is a pure core: time comes in as arguments, and the shell
// (admissionGate) holds the lock.
type Admission struct {
	cfg AdmissionConfig

	limit float64 // messages that may be pending; between Min and Max
	// grown is the limit below which it grows fast (TCP's slow start
	// threshold): by one message per message answered promptly, doubling
	// each round trip, up to where it was last cut; above it by one per
	// limit's worth.
	grown   float64
	pending int // messages taken and not yet answered
	cut     time.Time
	counts  AdmissionCounts
}

// AdmissionConfig are the bounds and the latency aimed for.
type AdmissionConfig struct {
	// Target is the answer latency above which the bound shrinks; 0 keeps
	// the bound at Max.
	Target time.Duration
	// Min and Max bound the limit, in messages. The limit starts at
	// Start (default: the smaller of Max and 1,024), so a node that
	// saturates before its first slow answer has not taken Max messages
	// to answer late; it grows fast while answers are prompt.
	Min, Max, Start int
	// Backoff is the factor a late answer multiplies the limit by, at most
	// once per Target (one late round trip is one signal, not one per
	// message in it).
	Backoff float64
}

// AdmissionCounts are what the core did, for metrics.
type AdmissionCounts struct {
	Admitted, Refused uint64 // messages
	Cuts              uint64 // times the limit shrank
}

// NewAdmission starts with the limit at cfg.Start.
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
	if cfg.Start <= 0 {
		cfg.Start = min(cfg.Max, 1024)
	}
	cfg.Start = min(max(cfg.Start, cfg.Min), cfg.Max)
	if cfg.Target <= 0 {
		cfg.Start = cfg.Max // nothing would grow it
	}
	return &Admission{cfg: cfg, limit: float64(cfg.Start), grown: float64(cfg.Max)}
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
// A late answer cuts the limit unless it was cut less than Target ago: the
// publishes answered in one slow round trip all come back late together.
// A prompt answer while the node is using at least half its limit grows
// it: by the answer's messages below where it was last cut, by one message
// per limit's worth above; a node that is not busy does not grow a limit
// it never tests.
func (a *Admission) Answered(n int, latency time.Duration, now time.Time) {
	a.pending = max(a.pending-n, 0)
	if a.cfg.Target <= 0 {
		return
	}
	if latency > a.cfg.Target {
		if now.Sub(a.cut) >= a.cfg.Target {
			if next := max(a.limit*a.cfg.Backoff, float64(a.cfg.Min)); next < a.limit {
				a.limit = next
				a.counts.Cuts++
			}
			a.grown = a.limit
			a.cut = now
		}
		return
	}
	if float64(a.pending+n)*2 < a.limit {
		return
	}
	if a.limit < a.grown {
		a.limit = min(a.limit+float64(n), a.grown)
	} else {
		a.limit += float64(n) / a.limit
	}
	a.limit = min(a.limit, float64(a.cfg.Max))
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
// them back; ok is false when the publish is refused.
func (g *admissionGate) admit(n int, reply func(r topic.Reply)) (func(r topic.Reply), bool) {
	if g == nil {
		return reply, true
	}
	g.mu.Lock()
	ok := g.core.Admit(n)
	g.mu.Unlock()
	if !ok {
		return reply, false
	}
	start := time.Now()
	return func(r topic.Reply) {
		now := time.Now()
		g.mu.Lock()
		g.core.Answered(n, now.Sub(start), now)
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
func (b *Broker) Admission() AdmissionState { return b.admission.state() }
