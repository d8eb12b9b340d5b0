package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// history is what the fault suite's clients did and saw: every publish
// attempted, every publish acknowledged (with when), every delivery. The
// ordered topic's messages are numbered by its single producer, so their
// delivery order can be checked against the order they were acknowledged.
type history struct {
	mu        sync.Mutex
	attempted map[string]bool
	acked     map[string]bool
	ackedAt   map[string]time.Time
	ackTimes  []time.Time
	delivered map[string]int
	// The ordered topic: sequence numbers acknowledged, and every delivery
	// on its ordered channel in the order the consumer saw them.
	ordAcked      map[int]bool
	ordAckTimes   []time.Time
	ordDeliveries []orderedDelivery
	ordReached    int // the highest number delivered
	ordCrossed    int // repeated deliveries found sent before the FIN they seemed to follow
}

// orderedDelivery is one delivery on the ordered channel: its number, and
// the number whose FIN it showed confirmed on every ISR member (the
// message before on the same connection), -1 for none; when it came and
// from which node's address, to read a violation beside the nodes' logs.
type orderedDelivery struct {
	seq, confirms int
	at            time.Time
	from          string
}

func newHistory() *history {
	return &history{attempted: map[string]bool{}, acked: map[string]bool{}, ackedAt: map[string]time.Time{}, delivered: map[string]int{}, ordAcked: map[int]bool{}, ordReached: -1}
}

func orderedBody(seq int) string { return fmt.Sprintf("o-%d", seq) }

func (h *history) attempt(body string) {
	h.mu.Lock()
	h.attempted[body] = true
	h.mu.Unlock()
}

func (h *history) ack(body string, at time.Time) {
	h.mu.Lock()
	h.acked[body] = true
	h.ackedAt[body] = at
	h.ackTimes = append(h.ackTimes, at)
	h.mu.Unlock()
}

func (h *history) ackOrdered(seq int, at time.Time) {
	h.mu.Lock()
	h.acked[orderedBody(seq)] = true
	h.ackedAt[orderedBody(seq)] = at
	h.ordAcked[seq] = true
	h.ordAckTimes = append(h.ordAckTimes, at)
	h.mu.Unlock()
}

func (h *history) deliver(body string) {
	h.mu.Lock()
	h.delivered[body]++
	h.mu.Unlock()
}

// deliverOrdered records a delivery on the ordered channel and returns its
// index, for crossedFin.
func (h *history) deliverOrdered(seq, confirms int, from string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.delivered[orderedBody(seq)]++
	h.ordDeliveries = append(h.ordDeliveries, orderedDelivery{seq: seq, confirms: confirms, at: time.Now(), from: from})
	h.ordReached = max(h.ordReached, seq)
	return len(h.ordDeliveries) - 1
}

// crossedFin takes back what delivery i seemed to show: it repeated the
// message before it, and its own FIN then failed, so the FIN of the first
// delivery finished this one and it was sent before that FIN arrived.
func (h *history) crossedFin(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ordDeliveries[i].confirms = -1
	h.ordCrossed++
}

// missing is how many acknowledged messages were never delivered.
func (h *history) missing() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for b := range h.acked {
		if h.delivered[b] == 0 {
			n++
		}
	}
	return n
}

// verdict is the checker's reading of a history.
type verdict struct {
	Attempted, Acknowledged, Lost, Duplicated int
	LostOrdered                               int // of Lost, on the ordered topic
	// Delivered but never published by any client.
	Phantom []string
	// Ordered channel: first deliveries of an acknowledged message before
	// an earlier acknowledged one had been delivered.
	OrderViolations []string
	// Ordered channel: deliveries again of a message at or before one whose
	// FIN was confirmed on every ISR member, or first deliveries there of
	// an acknowledged one. The fault suite and the process tests of moves
	// fail on them (strictOK).
	PastConfirmed []string
	// Ordered channel: first deliveries, after a later message's FIN was
	// confirmed, of a message whose publish failed: a forwarded publish
	// the leader applied after its forwarder had given up (docs/faults.md,
	// finding 12). Reported, not judged: the producer was told it failed.
	LateFailed []string
	// Ordered channel: deliveries of a number lower than the one before
	// (a redelivery of an unconfirmed message after a failover), counted
	// in Duplicated too.
	Rewinds int
	// Ordered channel: deliveries of the message before again that crossed
	// its FIN (crossedFin), counted in Duplicated too.
	Crossed int
	// Longest time without an acknowledged publish, over all producers and
	// for the ordered topic's single partition, within [from, to].
	MaxUnavailable, MaxUnavailableOrdered time.Duration
	// When each of those stretches began, after from: to find the fault
	// in the nemesis's schedule.
	MaxUnavailableAt, MaxUnavailableOrderedAt time.Duration
	LostExamples                              []string
}

func (v verdict) String() string {
	return fmt.Sprintf("attempted %d, acknowledged %d, lost %d (ordered topic %d), duplicated %d, phantom %d, order violations %d (rewinds %d, %d past a confirmed FIN %v, %d repeats that crossed their FIN, %d failed publishes applied late), max write unavailability %v from %.1fs (ordered partition %v from %.1fs)",
		v.Attempted, v.Acknowledged, v.Lost, v.LostOrdered, v.Duplicated, len(v.Phantom), len(v.OrderViolations), v.Rewinds,
		len(v.PastConfirmed), v.PastConfirmed[:min(5, len(v.PastConfirmed))], v.Crossed, len(v.LateFailed),
		v.MaxUnavailable.Round(time.Millisecond), v.MaxUnavailableAt.Seconds(),
		v.MaxUnavailableOrdered.Round(time.Millisecond), v.MaxUnavailableOrderedAt.Seconds())
}

// problems gives examples of each anomaly that fails ok.
func (v verdict) problems() string {
	return fmt.Sprintf("lost e.g. %v; phantom e.g. %v; order violations e.g. %v; past a confirmed FIN e.g. %v",
		v.LostExamples, v.Phantom[:min(10, len(v.Phantom))], v.OrderViolations[:min(10, len(v.OrderViolations))],
		v.PastConfirmed[:min(10, len(v.PastConfirmed))])
}

// ok is the suite's pass condition: nothing acknowledged lost, nothing
// invented, acknowledged ordered messages first delivered in order.
func (v verdict) ok() bool {
	return v.Lost == 0 && len(v.Phantom) == 0 && len(v.OrderViolations) == 0
}

// strictOK is ok with no redelivery past a confirmed FIN either.
func (v verdict) strictOK() bool { return v.ok() && len(v.PastConfirmed) == 0 }

func (h *history) check(from, to time.Time) verdict {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := verdict{Attempted: len(h.attempted), Acknowledged: len(h.acked)}
	var lost []string
	for b := range h.acked {
		if h.delivered[b] == 0 {
			lost = append(lost, b)
		}
	}
	sort.Strings(lost)
	v.Lost = len(lost)
	for _, b := range lost[:min(20, len(lost))] {
		v.LostExamples = append(v.LostExamples, fmt.Sprintf("%s (acknowledged at %.3fs)", b, h.ackedAt[b].Sub(from).Seconds()))
	}
	for _, b := range lost {
		if strings.HasPrefix(b, "o-") {
			v.LostOrdered++
		}
	}
	for b, n := range h.delivered {
		v.Duplicated += n - 1
		if !h.attempted[b] {
			v.Phantom = append(v.Phantom, b)
		}
	}
	sort.Strings(v.Phantom)
	v.OrderViolations, v.PastConfirmed, v.LateFailed, v.Rewinds = checkOrder(h.ordDeliveries, h.ordAcked)
	v.Crossed = h.ordCrossed
	v.MaxUnavailable, v.MaxUnavailableAt = longestGap(h.ackTimes, from, to)
	v.MaxUnavailableOrdered, v.MaxUnavailableOrderedAt = longestGap(h.ordAckTimes, from, to)
	return v
}

// checkOrder reads an ordered channel's deliveries: the first delivery of
// an acknowledged number must come after every lower acknowledged number
// was delivered (no gap, no reordering). Going back to a lower number is a
// redelivery, allowed (at least once) and counted, unless it goes back to
// or past a number whose FIN was confirmed on every ISR member: the
// channel's position there is on every replica a new leader can come
// from.
func checkOrder(deliveries []orderedDelivery, acked map[int]bool) (violations, pastConfirmed, lateFailed []string, rewinds int) {
	var ackedSeqs []int
	for s := range acked {
		ackedSeqs = append(ackedSeqs, s)
	}
	slices.Sort(ackedSeqs)
	seen := map[int]bool{}
	// next indexes the lowest acknowledged number not yet delivered.
	next, confirmed := 0, -1
	var confirmedBy orderedDelivery // the delivery that showed confirmed its FIN
	for i, d := range deliveries {
		s := d.seq
		if d.confirms > confirmed {
			confirmed, confirmedBy = d.confirms, d
		}
		switch {
		case s > confirmed:
		case seen[s]:
			pastConfirmed = append(pastConfirmed, fmt.Sprintf("delivery %d: %d again after %d was confirmed (%s from %s; confirmed by the delivery of %d %s from %s)",
				i, s, confirmed, d.at.UTC().Format(time.TimeOnly+".000"), d.from, confirmedBy.seq, confirmedBy.at.UTC().Format(time.TimeOnly+".000"), confirmedBy.from))
		case acked[s]:
			pastConfirmed = append(pastConfirmed, fmt.Sprintf("delivery %d: %d first delivered after %d was confirmed", i, s, confirmed))
		default:
			lateFailed = append(lateFailed, fmt.Sprintf("delivery %d: %d, whose publish failed, after %d was confirmed", i, s, confirmed))
		}
		if i > 0 && s < deliveries[i-1].seq {
			rewinds++
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		if acked[s] && next < len(ackedSeqs) && ackedSeqs[next] < s {
			violations = append(violations, fmt.Sprintf("delivery %d: %d before acknowledged %d", i, s, ackedSeqs[next]))
		}
		for next < len(ackedSeqs) && seen[ackedSeqs[next]] {
			next++
		}
	}
	return violations, pastConfirmed, lateFailed, rewinds
}

// longestGap is the longest stretch of [from, to] holding none of times,
// and how long after from it began.
func longestGap(times []time.Time, from, to time.Time) (longest, startedAfter time.Duration) {
	return longestGapSorted(sortedTimes(times), from, to)
}

func sortedTimes(times []time.Time) []time.Time {
	ts := slices.Clone(times)
	slices.SortFunc(ts, time.Time.Compare)
	return ts
}

// longestGapSorted is longestGap of times already sorted.
func longestGapSorted(ts []time.Time, from, to time.Time) (longest, startedAfter time.Duration) {
	i, _ := slices.BinarySearchFunc(ts, from, time.Time.Compare)
	prev := from
	for _, at := range append(ts[i:len(ts):len(ts)], to) {
		if at.After(to) {
			at = to
		}
		if gap := at.Sub(prev); gap > longest {
			longest, startedAfter = gap, prev.Sub(from)
		}
		if at.Equal(to) {
			break
		}
		prev = at
	}
	return longest, startedAfter
}

// faultWindow is one fault of the nemesis's schedule, from its injection
// to the next one's or the end of the run: the fault, its healing and the
// recovery it needed.
type faultWindow struct {
	kind     string
	from, to time.Time
}

// unavailabilityByKind is, for each kind of fault, the longest stretch
// without an acknowledged publish in each of its windows, over all
// producers and for the ordered topic's single partition.
func (h *history) unavailabilityByKind(windows []faultWindow) (all, ordered map[string][]time.Duration) {
	h.mu.Lock()
	ts, ots := sortedTimes(h.ackTimes), sortedTimes(h.ordAckTimes)
	h.mu.Unlock()
	all, ordered = map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, w := range windows {
		gap, _ := longestGapSorted(ts, w.from, w.to)
		all[w.kind] = append(all[w.kind], gap)
		gap, _ = longestGapSorted(ots, w.from, w.to)
		ordered[w.kind] = append(ordered[w.kind], gap)
	}
	return all, ordered
}

// spread is the median, 90th percentile and maximum of ds.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Sorted(slices.Values(ds))
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))].Round(10 * time.Millisecond) }
	return fmt.Sprintf("median %v, p90 %v, max %v", at(0.5), at(0.9), at(1))
}

// The checker finds each kind of anomaly in a made-up history, so a clean
// verdict from the fault suite means something.
func TestFaultCheckerFindsAnomalies(t *testing.T) {
	t0 := time.Unix(1000, 0)
	h := newHistory()
	for i, b := range []string{"a", "b", "c"} {
		h.attempt(b)
		h.ack(b, t0.Add(time.Duration(i)*time.Second))
	}
	h.attempt("d") // attempted, failed: may or may not be delivered
	for seq := 0; seq < 5; seq++ {
		h.attempt(orderedBody(seq))
		if seq != 3 {
			h.ackOrdered(seq, t0.Add(time.Duration(seq)*time.Second))
		}
	}
	for _, b := range []string{"a", "a", "c", "d", "zz"} {
		h.deliver(b)
	}
	// 3 was never acknowledged and may be skipped; 4 before 2 is a gap;
	// going back to 1, whose FIN failed, is a redelivery; 2 shows 1's FIN
	// confirmed, so going back to 0 then is a rewind past a confirmed one;
	// 3, whose publish failed, first delivered once 4's FIN was confirmed,
	// is a failed publish applied late, reported apart.
	for _, d := range [][2]int{{0, -1}, {1, 0}, {4, -1}, {1, -1}, {2, 1}, {0, -1}, {4, 2}, {3, 4}} {
		h.deliverOrdered(d[0], d[1], "n1")
	}
	v := h.check(t0, t0.Add(10*time.Second))
	if v.Lost != 1 || !strings.HasPrefix(v.LostExamples[0], "b (acknowledged at 1.000s)") {
		t.Errorf("lost %d %v, want b", v.Lost, v.LostExamples)
	}
	if len(v.Phantom) != 1 || v.Phantom[0] != "zz" {
		t.Errorf("phantom %v, want zz", v.Phantom)
	}
	if v.Duplicated != 4 || v.Rewinds != 3 {
		t.Errorf("duplicated %d rewinds %d, want 4 and 3", v.Duplicated, v.Rewinds)
	}
	if len(v.LateFailed) != 1 || !strings.Contains(v.LateFailed[0], "3, whose publish failed, after 4") {
		t.Errorf("late failed publishes %v", v.LateFailed)
	}
	if len(v.OrderViolations) != 1 || !strings.Contains(v.OrderViolations[0], "4 before acknowledged 2") {
		t.Errorf("order violations %v", v.OrderViolations)
	}
	if len(v.PastConfirmed) != 1 || !strings.Contains(v.PastConfirmed[0], "0 again after 1 was confirmed") || v.ok() || v.strictOK() {
		t.Errorf("past confirmed %v, ok %v, strict %v", v.PastConfirmed, v.ok(), v.strictOK())
	}
	if v.MaxUnavailable != 8*time.Second || v.MaxUnavailableOrdered != 6*time.Second {
		t.Errorf("unavailability %v %v, want 8s and 6s", v.MaxUnavailable, v.MaxUnavailableOrdered)
	}
	if v.MaxUnavailableAt != 2*time.Second || v.MaxUnavailableOrderedAt != 4*time.Second {
		t.Errorf("unavailability from %v and %v, want from 2s and 4s", v.MaxUnavailableAt, v.MaxUnavailableOrderedAt)
	}
	if v.ok() {
		t.Error("a history with anomalies passed")
	}
	windows := []faultWindow{
		{"kill -9", t0, t0.Add(3 * time.Second)},
		{"pause", t0.Add(3 * time.Second), t0.Add(10 * time.Second)},
	}
	all, ordered := h.unavailabilityByKind(windows)
	if !slices.Equal(all["kill -9"], []time.Duration{time.Second}) || !slices.Equal(all["pause"], []time.Duration{7 * time.Second}) {
		t.Errorf("longest gaps per fault over all producers %v, want 1s for the kill and 7s for the pause", all)
	}
	if !slices.Equal(ordered["kill -9"], []time.Duration{time.Second}) || !slices.Equal(ordered["pause"], []time.Duration{6 * time.Second}) {
		t.Errorf("longest gaps per fault on the ordered partition %v, want 1s for the kill and 6s for the pause", ordered)
	}
	if got := spread([]time.Duration{3 * time.Second, time.Second, 2 * time.Second}); got != "median 2s, p90 2s, max 3s" {
		t.Errorf("spread %q", got)
	}
	clean := newHistory()
	clean.attempt("x")
	clean.ack("x", t0)
	clean.deliver("x")
	if v := clean.check(t0, t0); !v.ok() {
		t.Errorf("a clean history failed: %v", v)
	}
}

// A message delivered again right after itself shows its first FIN
// confirmed unless the FIN of the repeat then fails: the first FIN finished
// the repeat, which crossed it on the wire.
func TestFinWitnessTakesBackARepeatThatCrossedItsFin(t *testing.T) {
	for _, tc := range []struct {
		name        string
		failed      []uint64 // IDs of the FINs that failed after the deliveries
		wantPast    int
		wantCrossed int
	}{
		{"the repeat's FIN succeeded", nil, 1, 0},
		{"another message's FIN failed", []uint64{100}, 1, 0},
		{"the repeat's FIN failed", []uint64{101}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHistory()
			for seq := 0; seq < 3; seq++ {
				h.attempt(orderedBody(seq))
				h.ackOrdered(seq, time.Unix(1000, 0))
			}
			w := finWitness{last: -1, repeat: -1}
			// 0, then 1 (0's FIN confirmed), then 1 again with no
			// E_FIN_FAILED between, then 2.
			for _, d := range []struct {
				seq       int
				confirmed bool
			}{{0, false}, {1, true}, {1, true}, {2, true}} {
				w.delivered(h, d.seq, uint64(100+d.seq), d.confirmed, "n1")
			}
			for _, id := range tc.failed {
				w.finFailed(h, id)
			}
			v := h.check(time.Unix(1000, 0), time.Unix(1001, 0))
			if len(v.PastConfirmed) != tc.wantPast || v.Crossed != tc.wantCrossed || !v.ok() {
				t.Errorf("past confirmed %v, crossed %d, ok %v; want %d past, %d crossed", v.PastConfirmed, v.Crossed, v.ok(), tc.wantPast, tc.wantCrossed)
			}
		})
	}
}
