package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The failover phase kills -9 the node leading most partitions among
// nodes 2 and 3 (node 1 hosts etcd, whose loss is another experiment) and
// probes each partition it led through every surviving node until each
// has taken a PUB through all of them: a client may be connected to any
// node, and a survivor that is not the new leader forwards, so a
// partition is back only once both take its PUBs. With --failover-load
// the cluster carries a steady load meanwhile, from a few seconds before
// the kill until the probe ends, and the survivors' liveness counters say
// whether the failover under load cost a live node its registration.

// defaultFailoverLead is how long the load runs before the kill
// (--failover-lead), so that the kill lands on a cluster already carrying
// it. At 10,000 partitions the first seconds of a load on idle partitions
// cost more than later ones (the heap grows), so the report gives the
// latencies due before the kill apart.
const defaultFailoverLead = 3 * time.Second

type failoverFigures struct {
	Node    int `json:"node"`
	Leaders int `json:"leaders"`
	// Recovered counts the partitions that took a PUB through every
	// surviving node; FirstS, P50S and AllS are when they had, after the
	// kill (for each partition, the later of its first OKs through each).
	Recovered int     `json:"recovered"`
	FirstS    float64 `json:"first_s"`
	P50S      float64 `json:"p50_s"`
	AllS      float64 `json:"all_s"` // -1 if some never answered OK through every survivor
	// EitherAllS is when the last partition took its first PUB through
	// either survivor, the weaker measure; -1 if some never did.
	EitherAllS float64      `json:"either_all_s"`
	Via        []viaFigures `json:"via,omitempty"`
	Attempts   int64        `json:"attempts"`
	// Slowest are the partitions that took a PUB through a survivor last.
	Slowest    []slowProbe `json:"slowest,omitempty"`
	FirstError string      `json:"first_error,omitempty"`
	LastError  string      `json:"last_error,omitempty"`
	// Load is --failover-load's, when it ran.
	Load *failoverLoadFigures `json:"load,omitempty"`
	// Survivors are the surviving nodes' liveness counters, from before
	// the load (or the kill) to after the probe.
	Survivors []counterFigures `json:"survivors,omitempty"`
	// Takeover is what the survivors' logs say of the failover's steps
	// (Partita only), read as the probe ends.
	Takeover *takeoverFigures `json:"takeover,omitempty"`
}

// slowProbe is one of the last partitions to take a PUB through a
// survivor: when the PUB that took went out and was answered, and the
// refusal before it, after the kill. A PUB out long before its answer
// waited (for the partition, or behind others on its connection); one
// refused just before is a partition that was not writable yet.
type slowProbe struct {
	Partition string  `json:"partition"`
	Via       int     `json:"via"`
	SentS     float64 `json:"sent_s"`
	OKS       float64 `json:"ok_s"`
	RefusedS  float64 `json:"refused_s,omitempty"`
	Refusal   string  `json:"refusal,omitempty"`
}

// probed is what one partition's PUBs through one survivor met, after the
// kill: the first OK and when the PUB that took went out (0 before any),
// and the last refusal before it, with when it was read.
type probed struct {
	ok, sent, refusedAt time.Duration
	refusal             string
}

// slowestProbes lists the n latest first OKs of any partition through any
// survivor.
func slowestProbes(lost []*partition, survivors []*node, tried [][]probed, n int) []slowProbe {
	var all []slowProbe
	for i, p := range lost {
		for v, via := range survivors {
			pr := tried[i][v]
			if pr.ok == 0 {
				continue
			}
			all = append(all, slowProbe{Partition: fmt.Sprintf("%s/%d", p.topic, p.p), Via: via.idx,
				SentS: pr.sent.Seconds(), OKS: pr.ok.Seconds(), RefusedS: pr.refusedAt.Seconds(), Refusal: pr.refusal})
		}
	}
	slices.SortFunc(all, func(a, b slowProbe) int { return cmp.Compare(b.OKS, a.OKS) })
	return all[:min(n, len(all))]
}

// viaFigures are the probe's PUBs through one surviving node.
type viaFigures struct {
	Node      int     `json:"node"`
	Recovered int     `json:"recovered"`
	AllS      float64 `json:"all_s"` // the last partition's first OK through it; -1 if some never
	// Refused counts the error answers by their code (the error frame's
	// first word), and LastRefusedS is when the last came, after the kill:
	// what kept the partitions from taking a PUB through this node.
	Refused      map[string]int64 `json:"refused,omitempty"`
	LastRefusedS float64          `json:"last_refused_s,omitempty"`
}

// failoverLoadFigures are the steady load of --failover-load. Its PUBs
// go to each partition's leader as the driver knew it before the kill, so
// those addressed to the killed node fail with its connections; those,
// and the refusals a survivor answers while the failover lasts
// (E_FAILED_ON_NOT_WRITABLE while a partition waits for its ISR to drop
// the killed replica, E_PUB_TOO_MUCH_WAITING), are failover refusals: a
// client retries them elsewhere or later. Load's refused, errors and
// unanswered are the rest, and its latencies those of every acked PUB.
type failoverLoadFigures struct {
	Load  loadFigures `json:"load"`
	LeadS float64     `json:"lead_s"` // the load's start to the kill
	// FailoverRefused counts the failover refusals; ToKilled those of
	// them addressed to the killed node.
	FailoverRefused int64 `json:"failover_refused"`
	ToKilled        int64 `json:"to_killed"`
	// The acked PUBs due after the kill: what the surviving leaders'
	// partitions answered while the failover lasted.
	AfterKillAcked int64 `json:"after_kill_acked"`
	AfterKillP50us int64 `json:"after_kill_p50_us"`
	AfterKillP99us int64 `json:"after_kill_p99_us"`
	// And those due before it: whether the kill met a cluster in its
	// steady state or one still taking the load on.
	BeforeKillAcked int64 `json:"before_kill_acked"`
	BeforeKillP50us int64 `json:"before_kill_p50_us"`
	BeforeKillP99us int64 `json:"before_kill_p99_us"`
}

// failover runs the phase; with loadRate > 0 under that load.
func failover(ctx context.Context, c *cluster, parts []partition, cfg config, loadRate float64, res *runResult) {
	f := &res.Failover
	count := map[int]int{}
	for _, p := range parts {
		count[p.leader]++
	}
	victim := c.nodes[1]
	if count[3] > count[2] {
		victim = c.nodes[2]
	}
	var survivors []*node
	for _, n := range c.nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}
	var lost []*partition
	for i := range parts {
		if parts[i].leader == victim.idx {
			lost = append(lost, &parts[i])
		}
	}
	f.Node, f.Leaders = victim.idx, len(lost)
	if len(lost) == 0 {
		f.FirstError = "the victim led no partition"
		return
	}
	// A nats-server has no counterpart of a node's liveness counters.
	if c.system == sysPartita {
		sc := startScrape(ctx, survivors)
		defer func() { f.Survivors = sc.finish() }()
	}

	var (
		loadStart time.Time
		loadDone  chan *loadRun
		stopLoad  chan struct{}
	)
	if loadRate > 0 {
		started := make(chan time.Time, 1)
		stopLoad, loadDone = make(chan struct{}), make(chan *loadRun, 1)
		// Longer than the probe can last: the probe's end stops it.
		seg := segment{loadRate, cfg.failoverLead + cfg.failoverTimeout + time.Second}
		go func() {
			loadDone <- publishWith(ctx, c, parts, cfg, []segment{seg}, loadHooks{started: started, stop: stopLoad})
		}()
		select {
		case loadStart = <-started:
		case run := <-loadDone:
			f.FirstError = "failover load: " + run.firstError
			return
		}
		pause(ctx, cfg.failoverLead)
	}
	killedAt := time.Now()
	err := victim.kill9()
	if err != nil {
		f.FirstError = "kill: " + err.Error()
	} else {
		b := newProbeBook(lost, survivors, killedAt, f)
		if c.system == sysNATS {
			probeJS(ctx, survivors, lost, cfg, b)
		} else {
			probe(ctx, survivors, lost, cfg, b)
			f.Takeover = takeoverFrom(killedAt, survivors)
		}
		b.summarize(lost, survivors)
	}
	if loadDone != nil {
		close(stopLoad)
		fl := failoverLoad(<-loadDone, victim.idx, killedAt.Sub(loadStart), c.system == sysNATS)
		f.Load = &fl
	}
}

// probeBook is what a probe's PUBs met, shared by its workers: tried[i][v]
// is what lost[i]'s PUBs through survivors[v] met (each (i, v) has one
// worker, so it is written without the lock), and the refusals by
// survivor.
type probeBook struct {
	killedAt    time.Time
	tried       [][]probed
	attempts    atomic.Int64
	mu          sync.Mutex
	f           *failoverFigures
	refused     []map[string]int64
	lastRefused []time.Duration
}

func newProbeBook(lost []*partition, survivors []*node, killedAt time.Time, f *failoverFigures) *probeBook {
	b := &probeBook{killedAt: killedAt, f: f, tried: make([][]probed, len(lost)),
		refused: make([]map[string]int64, len(survivors)), lastRefused: make([]time.Duration, len(survivors))}
	for i := range b.tried {
		b.tried[i] = make([]probed, len(survivors))
	}
	for v := range b.refused {
		b.refused[v] = map[string]int64{}
	}
	return b
}

func (b *probeBook) since() time.Duration { return time.Since(b.killedAt) }

func (b *probeBook) noteErr(s string) {
	b.mu.Lock()
	if b.f.FirstError == "" {
		b.f.FirstError = s
	}
	b.f.LastError = s
	b.mu.Unlock()
}

// refuse records lost[i]'s refusal through survivors[v], counted by its
// code (the text's first word).
func (b *probeBook) refuse(i, v int, text string) {
	b.noteErr(text)
	now := b.since()
	code, _, _ := strings.Cut(text, " ")
	b.mu.Lock()
	b.refused[v][code]++
	b.lastRefused[v] = max(b.lastRefused[v], now)
	b.mu.Unlock()
	b.tried[i][v].refusedAt, b.tried[i][v].refusal = now, text
}

// ok records lost[i]'s first OK through survivors[v], of a PUB sent at
// sent after the kill.
func (b *probeBook) ok(i, v int, sent time.Duration) {
	b.tried[i][v].ok, b.tried[i][v].sent = b.since(), sent
}

// probe PUBs to each of lost through each of survivors, every
// cfg.failoverRetry, until every partition has taken one through every
// survivor or cfg.failoverTimeout has passed since killedAt.
func probe(ctx context.Context, survivors []*node, lost []*partition, cfg config, b *probeBook) {
	body := []byte("failover probe")
	killedAt := b.killedAt
	var wg sync.WaitGroup
	trace := newProbeTrace(cfg.probeTrace)
	defer trace.close()
	// tryRun PUBs to the partitions of run on pc, through survivors[v],
	// and reads their answers; it returns those not OK. Past an error on
	// the connection the rest have no answer.
	tryRun := func(pc *pubConn, v int, run []int) (left []int, err error) {
		sent := b.since()
		pc.c.SetDeadline(time.Now().Add(cfg.failoverAckWait))
		pc.mu.Lock()
		for _, i := range run {
			pc.writePub(lost[i].topic, lost[i].p, body)
		}
		err = pc.w.Flush()
		pc.mu.Unlock()
		b.attempts.Add(int64(len(run)))
		for k, i := range run {
			if err != nil {
				return append(left, run[k:]...), err
			}
			var text string
			if text, err = pc.readAnswer(); err != nil {
				return append(left, run[k:]...), err
			}
			trace.note(v, pc, lost[i], sent, b.since(), text)
			if text != "" {
				b.refuse(i, v, text)
				left = append(left, i)
				continue
			}
			b.ok(i, v, sent)
		}
		return left, nil
	}
	// onClock probes share through survivors[v] as clockRun does,
	// dialling again after a failed connection.
	onClock := func(v int, via *node, share []int) {
		queue := make([]clockEntry, len(share))
		for k, i := range share {
			queue[k] = clockEntry{i: i}
		}
		sentAt := map[int]time.Duration{}
		for len(queue) > 0 && time.Now().Before(killedAt.Add(cfg.failoverTimeout)) && ctx.Err() == nil {
			pc, err := dialNSQ(via.tcp, 2*time.Second)
			if err != nil {
				b.noteErr(err.Error())
				pause(ctx, cfg.failoverRetry)
				continue
			}
			var pcErr error
			queue, pcErr = clockRun(ctx, pc, cfg.failoverInflight, cfg.failoverRetry, killedAt.Add(cfg.failoverTimeout), queue,
				func(i int) {
					pc.writePub(lost[i].topic, lost[i].p, body)
					sentAt[i] = b.since()
					b.attempts.Add(1)
				},
				func(i int, text string) bool {
					if text != "" {
						b.refuse(i, v, text)
						return true
					}
					b.ok(i, v, sentAt[i])
					return false
				})
			pc.Close()
			if pcErr != nil {
				b.noteErr(pcErr.Error())
			}
		}
	}
	deadline := killedAt.Add(cfg.failoverTimeout)
	for v, via := range survivors {
		for _, share := range probeShares(len(lost), len(survivors), cfg) {
			wg.Add(1)
			if cfg.failoverInflight > 0 {
				go func() {
					defer wg.Done()
					onClock(v, via, share)
				}()
				continue
			}
			go func() {
				defer wg.Done()
				var pc *pubConn
				defer func() {
					if pc != nil {
						pc.Close()
					}
				}()
				for len(share) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
					passStart := time.Now()
					if pc == nil {
						var err error
						if pc, err = dialNSQ(via.tcp, 2*time.Second); err != nil {
							b.noteErr(err.Error())
							pause(ctx, cfg.failoverRetry)
							continue
						}
					}
					// A window of 0 sends the whole share at once; otherwise
					// each run of window PUBs is answered before the next goes.
					var left []int
					var err error
					for rest := share; len(rest) > 0 && err == nil; {
						run := rest
						if cfg.failoverWindow > 0 && len(run) > cfg.failoverWindow {
							run = run[:cfg.failoverWindow]
						}
						rest = rest[len(run):]
						var no []int
						no, err = tryRun(pc, v, run)
						left = append(left, no...)
						if err != nil {
							left = append(left, rest...)
						}
					}
					share = left
					if err != nil {
						b.noteErr(err.Error())
						pc.Close()
						pc = nil
					}
					if len(share) > 0 {
						pause(ctx, max(0, cfg.failoverRetry-time.Since(passStart)))
					}
				}
			}()
		}
	}
	wg.Wait()
}

// probeShares splits the indexes of lost among the workers probing
// through one survivor.
func probeShares(lost, survivors int, cfg config) [][]int {
	perVia := max(1, min(cfg.failoverWorkers/survivors, lost))
	shares := make([][]int, perVia)
	for w := range perVia {
		for i := w; i < lost; i += perVia {
			shares[w] = append(shares[w], i)
		}
	}
	return shares
}

// summarize fills f from what the probe met.
func (b *probeBook) summarize(lost []*partition, survivors []*node) {
	f, tried := b.f, b.tried
	f.Attempts = b.attempts.Load()
	var every, either []time.Duration
	f.Via = make([]viaFigures, len(survivors))
	for v, n := range survivors {
		f.Via[v].Node = n.idx
		f.Via[v].Refused, f.Via[v].LastRefusedS = b.refused[v], b.lastRefused[v].Seconds()
	}
	for i := range lost {
		var latest, earliest time.Duration
		all := true
		for v := range survivors {
			t := tried[i][v].ok
			if t == 0 {
				all = false
				continue
			}
			f.Via[v].Recovered++
			f.Via[v].AllS = max(f.Via[v].AllS, t.Seconds())
			latest = max(latest, t)
			if earliest == 0 || t < earliest {
				earliest = t
			}
		}
		if all {
			every = append(every, latest)
		}
		if earliest > 0 {
			either = append(either, earliest)
		}
	}
	for v := range f.Via {
		if f.Via[v].Recovered < len(lost) {
			f.Via[v].AllS = -1
		}
	}
	f.Slowest = slowestProbes(lost, survivors, tried, 5)
	slices.Sort(every)
	slices.Sort(either)
	f.Recovered = len(every)
	if len(every) > 0 {
		f.FirstS = every[0].Seconds()
		f.P50S = percentile(every, 50).Seconds()
		f.AllS = every[len(every)-1].Seconds()
	}
	if len(every) < len(lost) {
		f.AllS = -1
	}
	f.EitherAllS = -1
	if len(either) == len(lost) {
		f.EitherAllS = either[len(either)-1].Seconds()
	}
}

// failoverLoad sorts the failover load's answers; kill is the kill's
// time since the load's start. JetStream has no refusal of its own: with
// jetStream, its errors answered after the kill (no responders while a
// stream has no leader, no ack in time) count as the failover's.
func failoverLoad(run *loadRun, victim int, kill time.Duration, jetStream bool) failoverLoadFigures {
	fl := failoverLoadFigures{LeadS: kill.Seconds()}
	l := run.figures(0)
	l.Refused, l.Errors = 0, 0
	// The killed node's connections fail by design: the first error is a
	// survivor's.
	l.FirstError = ""
	for _, n := range slices.Sorted(maps.Keys(run.firstErrorOf)) {
		if n != victim && l.FirstError == "" {
			l.FirstError = run.firstErrorOf[n]
		}
	}
	var before, after []time.Duration
	answered := map[uint8]int64{}
	for _, a := range run.answers {
		answered[a.node]++
		switch {
		case a.out == outAcked:
			if a.due >= kill {
				after = append(after, a.wait)
			} else {
				before = append(before, a.wait)
			}
		case int(a.node) == victim:
			fl.FailoverRefused++
			fl.ToKilled++
		case (a.out == outRefused || a.out == outNotWritable || jetStream && a.out == outError) && a.due+a.wait >= kill:
			fl.FailoverRefused++
		case a.out == outRefused:
			l.Refused++
		default:
			l.Errors++
		}
	}
	// PUBs written to the killed node that no answer will come for.
	unanswered := run.sentTo[victim] - answered[uint8(victim)]
	fl.FailoverRefused += unanswered
	fl.ToKilled += unanswered
	l.Unanswered = l.Sent - l.Acked - l.Refused - l.Errors - fl.FailoverRefused
	fl.Load = l
	fl.BeforeKillAcked, fl.BeforeKillP50us, fl.BeforeKillP99us = medianAndTail(before)
	fl.AfterKillAcked, fl.AfterKillP50us, fl.AfterKillP99us = medianAndTail(after)
	return fl
}

// medianAndTail sorts waits and gives their count, p50 and p99 in µs.
func medianAndTail(waits []time.Duration) (n, p50us, p99us int64) {
	slices.Sort(waits)
	return int64(len(waits)), us(waits, 50), us(waits, 99)
}

// printFailover prints the phase's figures.
func (r *runResult) printFailover(w io.Writer) {
	f := r.Failover
	if f.Leaders == 0 {
		return
	}
	secs := func(s float64) string {
		if s < 0 {
			return "not all"
		}
		return fmt.Sprintf("%.2f s", s)
	}
	fmt.Fprintf(w, "  failover: kill -9 of node %d leading %d partitions; %d take a PUB through every surviving node again: first %.2f s, median %.2f s, all %s after the kill (through either: all %s",
		f.Node, f.Leaders, f.Recovered, f.FirstS, f.P50S, secs(f.AllS), secs(f.EitherAllS))
	for _, v := range f.Via {
		fmt.Fprintf(w, "; through node %d: %d, all %s", v.Node, v.Recovered, secs(v.AllS))
	}
	fmt.Fprintf(w, ")\n")
	if f.Takeover != nil {
		fmt.Fprintf(w, "  takeover, from the survivors' logs: %s\n", f.Takeover)
	}
	for _, v := range f.Via {
		if len(v.Refused) > 0 {
			fmt.Fprintf(w, "  probe refusals through node %d: %v, the last %.2f s after the kill\n", v.Node, v.Refused, v.LastRefusedS)
		}
	}
	for _, s := range f.Slowest {
		fmt.Fprintf(w, "  slow: %s through node %d: sent %.2f s, OK %.2f s", s.Partition, s.Via, s.SentS, s.OKS)
		if s.Refusal != "" {
			fmt.Fprintf(w, "; refused %.2f s: %.60s", s.RefusedS, s.Refusal)
		}
		fmt.Fprintln(w)
	}
	if fl := f.Load; fl != nil {
		l := fl.Load
		fmt.Fprintf(w, "  load during the failover: %.0f PUB/s over %d connections from %.1f s before the kill until the probe ended (%.1f s): %d acked (%.0f/s), acked p50 %s, p99 %s, max %s (due before the kill: %d acked, p50 %s, p99 %s; due after it: %d acked, p50 %s, p99 %s); %d failover refusals (%d addressed to the killed node), %d refused, %d errors, %d unanswered\n",
			l.Rate, l.Connections, fl.LeadS, l.DurationS, l.Acked, l.AckedPerSec, ms(l.P50us), ms(l.P99us), ms(l.MaxUs),
			fl.BeforeKillAcked, ms(fl.BeforeKillP50us), ms(fl.BeforeKillP99us), fl.AfterKillAcked, ms(fl.AfterKillP50us), ms(fl.AfterKillP99us), fl.FailoverRefused, fl.ToKilled, l.Refused, l.Errors, l.Unanswered)
	}
	if len(f.Survivors) > 0 {
		var regs, evs, gaps, scrapes string
		for i, n := range f.Survivors {
			sep := ""
			if i > 0 {
				sep = " / "
			}
			regs += fmt.Sprintf("%s%d", sep, n.RegistrationsLost)
			evs += fmt.Sprintf("%s%d", sep, n.PeerEvictions)
			gaps += fmt.Sprintf("%s%d", sep, n.KeepaliveGapMS)
			scrapes += fmt.Sprintf("%s%d", sep, n.Scrapes)
		}
		fmt.Fprintf(w, "  surviving nodes %s, from /metrics over the failover: registrations lost %s, peer evictions %s, longest lease renewal gap ≤ %s ms (scrapes %s)\n",
			survivorNames(f.Survivors), regs, evs, gaps, scrapes)
	}
}

func survivorNames(ns []counterFigures) string {
	var s string
	for i, n := range ns {
		if i > 0 {
			s += " / "
		}
		s += fmt.Sprint(n.Node)
	}
	return s
}
