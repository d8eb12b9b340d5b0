package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// refusedCode is the answer of a node shedding load: non-fatal, the
// connection stays open, and a client is meant to back off and retry. It
// is counted apart from errors because refusing quickly is the node's
// intended behaviour under overload, not a fault.
const refusedCode = "E_PUB_TOO_MUCH_WAITING"

// pending is a PUB of the load: when the schedule wanted it sent.
type pending struct {
	due time.Time
	dst *partition
}

// outcome is what became of one PUB of a load.
type outcome uint8

const (
	outAcked       outcome = iota
	outRefused             // refusedCode
	outError               // any other error frame
	outLost                // not written, or its write failed: no answer will come
	outNotWritable         // notWritableCode: an error, but during a failover a refusal
)

// notWritableCode is a partition leader's answer while it cannot take a
// write: its ISR lacks replicas, or a replica's ack timed out. Outside a
// failover it is an error like any other.
const notWritableCode = "E_FAILED_ON_NOT_WRITABLE"

// answer is one PUB's fate. PUBs are told apart by their due time (since
// the schedule's start), which places each in its segment and second
// whenever its answer came.
type answer struct {
	due, wait time.Duration
	out       outcome
	node      uint8 // the node the PUB was sent to
}

// loadConn is one producer connection of a load with what came back on
// it. How a PUB travels and how its answer is matched to it is the
// producer's: NSQ answers in order, JetStream acks each publish by its
// own reply subject.
type loadConn struct {
	node  int // the node it is connected to
	prod  producer
	start time.Time
	queue chan pending // from the schedule

	mu         sync.Mutex
	sent       int64 // handed to this connection by the schedule
	answers    []answer
	firstError string
	broken     bool
}

// producer is one system's client connection of a load. publish sends a
// PUB (it may buffer it while more are queued: flush false) and returns an
// error only when the connection can take no more; the producer notes
// every answer, and every PUB that failed alone, on its loadConn.
type producer interface {
	publish(pd pending, body []byte, flush bool) error
	flush()
	close()
}

func (lc *loadConn) note(due time.Time, wait time.Duration, out outcome, msg string) {
	lc.mu.Lock()
	lc.answers = append(lc.answers, answer{due: due.Sub(lc.start), wait: wait, out: out, node: uint8(lc.node)})
	if msg != "" && lc.firstError == "" {
		lc.firstError = msg
	}
	lc.mu.Unlock()
}

func (lc *loadConn) setBroken() {
	lc.mu.Lock()
	lc.broken = true
	lc.mu.Unlock()
}

func (lc *loadConn) write(body []byte) {
	for pd := range lc.queue {
		lc.mu.Lock()
		lc.sent++
		broken := lc.broken
		lc.mu.Unlock()
		if broken {
			lc.note(pd.due, 0, outLost, "connection broken")
			continue
		}
		if err := lc.prod.publish(pd, body, len(lc.queue) == 0); err != nil {
			lc.setBroken()
			lc.note(pd.due, 0, outLost, "write: "+err.Error())
		}
	}
	lc.prod.flush()
}

// nsqProducer is a Partita connection: PUBs answered in order, so the due
// times of those written wait in inflight for their answers.
type nsqProducer struct {
	lc       *loadConn
	pc       *pubConn
	inflight chan time.Time
}

func newNSQProducer(lc *loadConn, pc *pubConn) *nsqProducer {
	return &nsqProducer{lc: lc, pc: pc, inflight: make(chan time.Time, 1<<16)}
}

func (p *nsqProducer) publish(pd pending, body []byte, flush bool) error {
	p.inflight <- pd.due
	p.pc.mu.Lock()
	defer p.pc.mu.Unlock()
	err := p.pc.writePub(pd.dst.topic, pd.dst.p, body)
	if err == nil && flush {
		err = p.pc.w.Flush()
	}
	return err
}

func (p *nsqProducer) flush() {
	p.pc.mu.Lock()
	p.pc.w.Flush()
	p.pc.mu.Unlock()
}

func (p *nsqProducer) close() { p.pc.Close() }

func (p *nsqProducer) read() {
	for {
		text, err := p.pc.readAnswer()
		if err != nil {
			p.lc.setBroken()
			return
		}
		due := <-p.inflight
		wait := time.Since(due)
		switch {
		case text == "":
			p.lc.note(due, wait, outAcked, "")
		case strings.HasPrefix(text, refusedCode):
			p.lc.note(due, wait, outRefused, "")
		case strings.HasPrefix(text, notWritableCode):
			p.lc.note(due, wait, outNotWritable, text)
		default:
			p.lc.note(due, wait, outError, text)
		}
	}
}

// segment is a stretch of a load's schedule at one rate.
type segment struct {
	rate float64
	dur  time.Duration
}

// segmentRun is what the schedule did in one segment.
type segmentRun struct {
	segment
	from      time.Duration // since the schedule's start
	interval  time.Duration
	scheduled int64
	perSecond []int64 // PUBs due in each second since from
	lags      []time.Duration
}

// loadRun is one load's schedule and every answer to it.
type loadRun struct {
	conns      int
	segs       []segmentRun
	answers    []answer
	sentTo     map[int]int64 // PUBs handed to each node's connections
	start      time.Time     // the schedule's start
	span       time.Duration // the schedule's start until its last PUB was written
	firstError string
	// firstErrorOf is the first error of each node's connections.
	firstErrorOf map[int]string
}

// loadHooks let a phase act on a load while it runs.
type loadHooks struct {
	started chan<- time.Time // is sent the schedule's start
	stop    <-chan struct{}  // closed: the schedule ends there
}

// runLoad publishes cfg.loadRate PUBs a second for cfg.loadDuration, open
// loop, round-robin over parts: see publish.
func runLoad(ctx context.Context, c *cluster, parts []partition, cfg config, l *loadFigures) {
	before := c.cpuTicks()
	*l = publish(ctx, c, parts, cfg, []segment{{cfg.loadRate, cfg.loadDuration}}).figures(0)
	if spent := c.cpuTicks() - before; before >= 0 && spent >= 0 && l.Acked > 0 {
		l.NodeCPUPerAckedUs = float64(spent) / clockTicks * 1e6 / float64(l.Acked)
	}
}

// publish runs an open-loop schedule of segments back to back on one set
// of connections, so a later segment's PUBs queue behind an earlier one's
// backlog as a client's would: PUB k goes to partition k mod len(parts),
// on a connection to that partition's leader as a partition-aware client
// would send it. Latency counts from the PUB's scheduled time. After the
// last PUB it waits up to cfg.loadDrain for the answers.
func publish(ctx context.Context, c *cluster, parts []partition, cfg config, segs []segment) *loadRun {
	return publishWith(ctx, c, parts, cfg, segs, loadHooks{})
}

// publishWith is publish with hooks: a schedule that tells its start and
// can be ended early, its last segment cut where it stopped.
func publishWith(ctx context.Context, c *cluster, parts []partition, cfg config, segs []segment, hooks loadHooks) *loadRun {
	run := &loadRun{conns: cfg.loadConns * len(c.nodes), sentTo: map[int]int64{}, firstErrorOf: map[int]string{}}
	var total time.Duration
	minInterval := time.Duration(1<<63 - 1)
	for _, s := range segs {
		iv := max(time.Duration(float64(time.Second)/s.rate), 1)
		run.segs = append(run.segs, segmentRun{segment: s, from: total, interval: iv,
			perSecond: make([]int64, int(s.dur/time.Second)+1),
			lags:      make([]time.Duration, 0, int(s.dur/iv)+1)})
		total += s.dur
		minInterval = min(minInterval, iv)
	}
	byNode := make([][]*loadConn, len(c.nodes)+1)
	var all []*loadConn
	defer func() {
		for _, lc := range all {
			lc.prod.close()
		}
	}()
	var expected int
	for _, s := range run.segs {
		expected += int(s.dur / s.interval)
	}
	expected = expected/max(run.conns, 1) + 1
	for _, n := range c.nodes {
		for range cfg.loadConns {
			lc := &loadConn{node: n.idx, queue: make(chan pending, 4096), answers: make([]answer, 0, expected)}
			if err := c.dialProducer(n, lc, cfg); err != nil {
				run.firstError = fmt.Sprintf("connecting to node %d: %v", n.idx, err)
				return run
			}
			byNode[n.idx] = append(byNode[n.idx], lc)
			all = append(all, lc)
		}
	}
	body := make([]byte, cfg.msgSize)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}

	start := time.Now()
	run.start = start
	var writers sync.WaitGroup
	for _, lc := range all {
		lc.start = start
		writers.Add(1)
		go func() { defer writers.Done(); lc.write(body) }()
	}
	if hooks.started != nil {
		hooks.started <- start
	}
	rr := make([]int, len(byNode))
	tick := time.NewTicker(max(minInterval, 100*time.Microsecond))
	k, si, next := 0, 0, start
	for si < len(run.segs) && ctx.Err() == nil {
		for now := time.Now(); si < len(run.segs) && !next.After(now); {
			s := &run.segs[si]
			dst := &parts[k%len(parts)]
			// A partition without a known leader goes to node 1, which
			// forwards it, as any node would.
			conns := byNode[max(dst.leader, 1)]
			conns[rr[dst.leader]%len(conns)].queue <- pending{due: next, dst: dst}
			rr[dst.leader]++
			s.scheduled++
			s.perSecond[(next.Sub(start)-s.from)/time.Second]++
			s.lags = append(s.lags, now.Sub(next))
			k++
			// Each segment starts on its own boundary rather than where
			// the previous interval ended, so its rate holds from its
			// first second.
			if next = next.Add(s.interval); next.Sub(start) >= s.from+s.dur {
				if si++; si < len(run.segs) {
					next = start.Add(run.segs[si].from)
				}
			}
		}
		if si < len(run.segs) {
			select {
			case <-tick.C:
			case <-hooks.stop:
				// The segment ends with the last PUB due before now, and
				// those after it are dropped.
				run.segs[si].dur = next.Sub(start) - run.segs[si].from
				run.segs = run.segs[:si+1]
				si = len(run.segs)
			}
		}
	}
	tick.Stop()
	for _, lc := range all {
		close(lc.queue)
	}
	writers.Wait()
	run.span = time.Since(start)

	drain := cfg.loadDrain
	if c.system == sysNATS {
		// A JetStream publish unacked after loadDrain is timed out by the
		// client, an error; the second more lets the last timers fire,
		// so that none is left unanswered.
		drain += time.Second
	}
	deadline := time.Now().Add(drain)
	for time.Now().Before(deadline) {
		done := true
		for _, lc := range all {
			lc.mu.Lock()
			if !lc.broken && int64(len(lc.answers)) < lc.sent {
				done = false
			}
			lc.mu.Unlock()
		}
		if done {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, lc := range all {
		lc.mu.Lock()
		run.sentTo[lc.node] += lc.sent
		if run.firstErrorOf[lc.node] == "" {
			run.firstErrorOf[lc.node] = lc.firstError
		}
		run.answers = append(run.answers, lc.answers...)
		if run.firstError == "" {
			run.firstError = lc.firstError
		}
		lc.mu.Unlock()
	}
	return run
}

// in reports whether a PUB due at due belongs to segment i.
func (r *loadRun) in(i int, due time.Duration) bool {
	s := r.segs[i]
	return due >= s.from && due < s.from+s.dur
}

// figures are segment i's answers. Acked/s is over the segment's length,
// or for the last one until its last PUB was written.
func (r *loadRun) figures(i int) loadFigures {
	s := r.segs[i]
	l := loadFigures{Rate: s.rate, DurationS: s.dur.Seconds(), Connections: r.conns, Sent: s.scheduled, FirstError: r.firstError}
	var acked []time.Duration
	for _, a := range r.answers {
		if !r.in(i, a.due) {
			continue
		}
		switch a.out {
		case outAcked:
			acked = append(acked, a.wait)
		case outRefused:
			l.Refused++
		default:
			l.Errors++
		}
		if a.out != outLost {
			l.MaxAnswerUs = max(l.MaxAnswerUs, a.wait.Microseconds())
		}
	}
	l.Acked = int64(len(acked))
	l.Unanswered = l.Sent - l.Acked - l.Refused - l.Errors
	span := s.dur
	if i == len(r.segs)-1 {
		span = r.span - s.from
	}
	if span > 0 {
		l.AckedPerSec = float64(l.Acked) / span.Seconds()
	}
	slices.Sort(acked)
	lags := slices.Clone(s.lags)
	slices.Sort(lags)
	l.P50us, l.P99us, l.P999us, l.MaxUs = us(acked, 50), us(acked, 99), us(acked, 99.9), us(acked, 100)
	l.LagP99us = us(lags, 99)
	return l
}

// ackedWithin counts the acks of segment i that came back before the
// segment ended: what the cluster confirmed while the segment lasted,
// which a backlog answered later does not inflate.
func (r *loadRun) ackedWithin(i int) int64 {
	s := r.segs[i]
	var n int64
	for _, a := range r.answers {
		if a.out == outAcked && r.in(i, a.due) && a.due+a.wait < s.from+s.dur {
			n++
		}
	}
	return n
}

// seconds are segment i's answers by the second their PUBs were due in.
func (r *loadRun) seconds(i int) []secondFigures {
	s := r.segs[i]
	secs := make([]secondFigures, len(s.perSecond))
	acked := make([][]time.Duration, len(s.perSecond))
	for _, a := range r.answers {
		if !r.in(i, a.due) {
			continue
		}
		sec := int((a.due - s.from) / time.Second)
		switch a.out {
		case outAcked:
			acked[sec] = append(acked[sec], a.wait)
		case outRefused:
			secs[sec].Refused++
		default:
			secs[sec].Errors++
		}
	}
	var out []secondFigures
	for sec, sent := range s.perSecond {
		if sent == 0 {
			continue
		}
		b := secs[sec]
		b.S, b.Sent, b.Acked = sec, sent, int64(len(acked[sec]))
		b.Unanswered = b.Sent - b.Acked - b.Refused - b.Errors
		slices.Sort(acked[sec])
		b.P99us = us(acked[sec], 99)
		out = append(out, b)
	}
	return out
}

// dialProducer opens lc's connection to n in the cluster's protocol.
func (c *cluster) dialProducer(n *node, lc *loadConn, cfg config) error {
	if c.system == sysNATS {
		p, err := dialJSProducer(n, lc, cfg.loadDrain)
		if err != nil {
			return err
		}
		lc.prod = p
		return nil
	}
	pc, err := dialNSQ(n.tcp, 5*time.Second)
	if err != nil {
		return err
	}
	p := newNSQProducer(lc, pc)
	lc.prod = p
	go p.read()
	return nil
}
