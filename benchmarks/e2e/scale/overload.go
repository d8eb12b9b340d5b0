package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The sweep (--sweep) finds the highest rate the cluster carries within
// kneeP99 and without shedding anything; the overload (--overload) then
// publishes a multiple of it to see whether the node sheds the excess
// (refusals, answered quickly) instead of falling behind until the
// cluster itself suffers: leases lapse, peers are evicted, ISRs shrink,
// partitions lose their leader. Those show in the nodes' counters, so
// they are scraped while it runs.

const (
	kneeP99 = 50 * time.Millisecond
	// sweepPause lets the previous step's fsyncs and commits finish, so a
	// step does not pay for the one before.
	sweepPause = 2 * time.Second
	// probeDuration and probeMaxRate: the probe should be a load the
	// cluster carries easily whatever N, so its latencies show the
	// overload's aftermath, not a load of its own.
	probeDuration = 10 * time.Second
	probeMaxRate  = 1000
)

// overloadFigures are the --overload run and its recovery probe.
type overloadFigures struct {
	Factor float64 `json:"factor"`
	Knee   float64 `json:"knee"` // the rate multiplied: the sweep's, or --knee
	// Load's acked_per_s counts only the acks that came back while the
	// overload lasted.
	Load        loadFigures `json:"load"`
	AckedOfKnee float64     `json:"acked_of_knee"` // Load.AckedPerSec / Knee
	Probe       loadFigures `json:"probe"`
	// ProbeSeconds are the probe's PUBs by the second they were due in,
	// counted from the overload's end.
	ProbeSeconds []secondFigures `json:"probe_seconds"`
	// RecoveredS is the first of ProbeSeconds whose PUBs were all acked
	// with p99 ≤ kneeP99; -1 never.
	RecoveredS int `json:"recovered_s"`
	// Counters are each node's, over the overload and the probe; Total
	// sums them, but for the leaderless partitions, which are node 1's
	// view (every node reads the same metadata).
	Nodes []counterFigures `json:"nodes"`
	Total counterFigures   `json:"total"`
	// Checkpoints are the journal checkpoints the nodes logged from the
	// overload's start to the probe's end: each a syncfs that makes
	// appends answer later while it runs.
	Checkpoints []checkpointFigure `json:"checkpoints,omitempty"`
}

// checkpointFigure is one journal checkpoint a node logged.
type checkpointFigure struct {
	Node int `json:"node"`
	// EndS is when it ended, in seconds after the probe began (negative:
	// during the overload); TookS is how long it took.
	EndS  float64 `json:"end_s"`
	TookS float64 `json:"took_s"`
}

var checkpointTook = regexp.MustCompile(` msg="journal checkpoint" took=(\S+)`)

// checkpointsFrom reads node idx's log for the journal checkpoints that
// ended at or after from, timed from probeStart.
func checkpointsFrom(r io.Reader, idx int, from, probeStart time.Time) []checkpointFigure {
	var out []checkpointFigure
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		m, t := checkpointTook.FindStringSubmatch(line), logTime.FindStringSubmatch(line)
		if m == nil || t == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, t[1])
		took, err2 := time.ParseDuration(m[1])
		if err != nil || err2 != nil || at.Before(from) {
			continue
		}
		out = append(out, checkpointFigure{Node: idx, EndS: at.Sub(probeStart).Seconds(), TookS: took.Seconds()})
	}
	return out
}

// counterFigures are the increases of a node's liveness counters over a
// window, from its /metrics.
type counterFigures struct {
	Node              int   `json:"node,omitempty"`
	ISRShrinks        int64 `json:"isr_shrinks"`
	RegistrationsLost int64 `json:"registrations_lost"`
	PeerEvictions     int64 `json:"peer_evictions"`
	LeaderElections   int64 `json:"leader_elections"`
	MaxNoLeader       int64 `json:"max_partitions_without_leader"`
	// KeepaliveGapMS bounds the longest time between two acknowledged
	// renewals of the node's lease in the window: the upper bound of the
	// highest bucket of partita_node_lease_keepalive_gap_seconds that
	// gained an observation; -1 past the last bucket, 0 when unknown.
	KeepaliveGapMS   int64  `json:"keepalive_gap_ms,omitempty"`
	Scrapes          int    `json:"scrapes"`
	ScrapeErrors     int    `json:"scrape_errors,omitempty"`
	FirstScrapeError string `json:"first_scrape_error,omitempty"`
	// Missing names the families a node did not serve (an older build):
	// their zero is unknown, not none. Only those with a sample from the
	// start can be missed: a labelled family has none before its first
	// event.
	Missing []string `json:"missing,omitempty"`
}

const (
	famShrinks   = "partita_isr_shrinks_total"
	famRegLost   = "partita_node_registrations_lost_total"
	famEvictions = "partita_peer_evictions_total"
	famElections = "partita_leader_elections_total"
	famNoLeader  = "partita_cluster_partitions_without_leader"
	famGap       = "partita_node_lease_keepalive_gap_seconds_bucket"
)

var (
	scrapedFamilies = []string{famShrinks, famRegLost, famEvictions, famElections, famNoLeader, famGap}
	alwaysServed    = []string{famRegLost, famEvictions, famNoLeader}
)

// runSweep runs a steady load at each of cfg.sweep in turn and stops at
// the first step beyond the knee: past it the cluster is overloaded, and
// a higher rate would only leave a backlog for whatever runs next.
func runSweep(ctx context.Context, c *cluster, parts []partition, cfg config, res *runResult, logf func(string, ...any)) {
	for i, rate := range cfg.sweep {
		if i > 0 && !pause(ctx, sweepPause) {
			return
		}
		step := cfg
		step.loadRate, step.loadDuration = rate, cfg.sweepDuration
		var l loadFigures
		runLoad(ctx, c, parts, step, &l)
		res.Sweep = append(res.Sweep, l)
		within := l.withinKnee() && ctx.Err() == nil
		verdict := "within the knee's bounds"
		if !within {
			verdict = "beyond the knee"
		}
		logf("sweep %.0f PUB/s: %.0f acked/s, p50 %s, p99 %s, %d errors, %d refused, %d unanswered, server CPU %s µs per acked PUB: %s",
			rate, l.AckedPerSec, ms(l.P50us), ms(l.P99us), l.Errors, l.Refused, l.Unanswered, num(l.NodeCPUPerAckedUs, 0), verdict)
		if !within || len(c.died()) > 0 {
			return
		}
		res.Knee = rate
	}
}

// runOverload publishes at cfg.overload × knee for cfg.overloadDuration,
// then, on the same connections and with no gap, at the probe's rate for
// probeDuration, scraping every node's counters throughout.
func runOverload(ctx context.Context, c *cluster, parts []partition, cfg config, knee float64, res *runResult) {
	o := &overloadFigures{Factor: cfg.overload, Knee: knee, RecoveredS: -1}
	res.Overload = o
	var sc *scraper
	if c.system == sysPartita {
		sc = startScrape(ctx, c.nodes)
	} else {
		res.notMeasured("the overload's node counters (ISR shrinks, registrations lost, peer evictions, leader elections, leaderless partitions, lease renewal gaps: Partita's /metrics)")
	}
	run := publish(ctx, c, parts, cfg, []segment{
		{cfg.overload * knee, cfg.overloadDuration},
		{min(knee/2, probeMaxRate), probeDuration},
	})
	if sc != nil {
		o.Nodes = sc.finish()
		probeStart := run.start.Add(cfg.overloadDuration)
		for _, n := range c.nodes {
			if f, err := os.Open(n.log); err == nil {
				o.Checkpoints = append(o.Checkpoints, checkpointsFrom(f, n.idx, run.start, probeStart)...)
				f.Close()
			}
		}
	}

	o.Load = run.figures(0)
	o.Load.AckedPerSec = float64(run.ackedWithin(0)) / cfg.overloadDuration.Seconds()
	o.AckedOfKnee = o.Load.AckedPerSec / knee
	o.Probe = run.figures(1)
	o.ProbeSeconds = run.seconds(1)
	for _, s := range o.ProbeSeconds {
		// A second still refusing or failing is not recovered, however
		// fast the few PUBs it took.
		if s.Acked > 0 && s.Acked == s.Sent && s.P99us <= kneeP99.Microseconds() {
			o.RecoveredS = s.S
			break
		}
	}
	for i, n := range o.Nodes {
		t := &o.Total
		t.ISRShrinks += n.ISRShrinks
		t.RegistrationsLost += n.RegistrationsLost
		t.PeerEvictions += n.PeerEvictions
		t.LeaderElections += n.LeaderElections
		if n.KeepaliveGapMS < 0 || (t.KeepaliveGapMS >= 0 && n.KeepaliveGapMS > t.KeepaliveGapMS) {
			t.KeepaliveGapMS = n.KeepaliveGapMS
		}
		t.Scrapes += n.Scrapes
		t.ScrapeErrors += n.ScrapeErrors
		if i == 0 {
			t.MaxNoLeader = n.MaxNoLeader
		}
		if n.Scrapes < 2 {
			res.fail(fmt.Sprintf("overload: node %d's /metrics read %d times (first error: %s): its counters are unknown", n.Node, n.Scrapes, n.FirstScrapeError))
		}
	}
	t := o.Total
	if t.ISRShrinks > 0 || t.RegistrationsLost > 0 || t.PeerEvictions > 0 || t.MaxNoLeader > 0 {
		res.fail(fmt.Sprintf("overload: %d ISR shrinks, %d registrations lost, %d peer evictions, up to %d partitions without a leader",
			t.ISRShrinks, t.RegistrationsLost, t.PeerEvictions, t.MaxNoLeader))
	}
	if o.Load.Acked == 0 {
		res.fail("overload: nothing acked (first error: " + o.Load.FirstError + ")")
	}
	if o.Load.Unanswered > 0 || o.Probe.Unanswered > 0 {
		res.fail(fmt.Sprintf("overload: %d PUBs unanswered, %d more in the probe (first error: %s)", o.Load.Unanswered, o.Probe.Unanswered, o.Load.FirstError))
	}
}

func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// A node of an older build gathers every family on each read of
// /metrics, whatever name[] asks for, thousands of series with thousands
// of partitions: read every second, that cost alone moved the latencies
// measured. Every 5 s still sees a leaderless spell of a failover; the
// counters are totals, read from the first reading to the last whatever
// the period.
const (
	scrapeEvery   = 5 * time.Second
	scrapeTimeout = 30 * time.Second
)

// metricsURL asks a node for the scraped families only (name[]), so it
// gathers, encodes and sends those rather than every series.
func metricsURL(hostport string) string {
	q := url.Values{}
	for _, f := range scrapedFamilies {
		q.Add("name[]", strings.TrimSuffix(f, "_bucket"))
	}
	return "http://" + hostport + "/metrics?" + q.Encode()
}

// scraper reads every node's /metrics every scrapeEvery until finish.
type scraper struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	nodes []*nodeScrape
}

type nodeScrape struct {
	first, last map[string]float64 // family sums
	counterFigures
}

// startScrape returns once every one of nodes has been read once (or
// failed to be), so the window's baseline precedes the load.
func startScrape(ctx context.Context, nodes []*node) *scraper {
	s := &scraper{stop: make(chan struct{})}
	var baseline sync.WaitGroup
	for _, n := range nodes {
		ns := &nodeScrape{counterFigures: counterFigures{Node: n.idx}}
		s.nodes = append(s.nodes, ns)
		baseline.Add(1)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			ns.read(ctx, n)
			baseline.Done()
			// A scrape slower than the period delays the next rather than
			// piling up on a node that is already behind.
			tick := time.NewTicker(scrapeEvery)
			defer tick.Stop()
			for {
				select {
				case <-s.stop:
					ns.read(ctx, n)
					return
				case <-ctx.Done():
					return
				case <-tick.C:
					ns.read(ctx, n)
				}
			}
		}()
	}
	baseline.Wait()
	return s
}

// finish takes a last reading of every node and returns each one's
// increases from its first reading to its last.
func (s *scraper) finish() []counterFigures {
	close(s.stop)
	s.wg.Wait()
	var out []counterFigures
	for _, ns := range s.nodes {
		f := ns.counterFigures
		inc := func(fam string) int64 { return int64(ns.last[fam] - ns.first[fam]) }
		f.ISRShrinks, f.RegistrationsLost = inc(famShrinks), inc(famRegLost)
		f.PeerEvictions, f.LeaderElections = inc(famEvictions), inc(famElections)
		f.KeepaliveGapMS = longestGap(ns.first, ns.last)
		for _, fam := range alwaysServed {
			if _, ok := ns.last[fam]; !ok && ns.last != nil {
				f.Missing = append(f.Missing, fam)
			}
		}
		out = append(out, f)
	}
	return out
}

func (ns *nodeScrape) read(ctx context.Context, n *node) {
	sums, err := scrapeFamilies(ctx, metricsURL(n.http), scrapedFamilies, scrapeTimeout)
	if err != nil {
		ns.ScrapeErrors++
		if ns.FirstScrapeError == "" {
			ns.FirstScrapeError = err.Error()
		}
		return
	}
	ns.Scrapes++
	if ns.first == nil {
		ns.first = sums
	}
	ns.last = sums
	ns.MaxNoLeader = max(ns.MaxNoLeader, int64(sums[famNoLeader]))
}

// scrapeFamilies reads a Prometheus text exposition and sums the samples
// of each of the named families over their label sets. It streams: a node
// with thousands of partitions serves megabytes, most of them other
// families.
func scrapeFamilies(ctx context.Context, url string, families []string, timeout time.Duration) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return sumFamilies(resp.Body, families)
}

func sumFamilies(r io.Reader, families []string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, f := range families {
		want[f] = true
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		end := bytes.IndexAny(line, "{ ")
		if end < 0 || !want[string(line[:end])] {
			continue
		}
		name, rest := string(line[:end]), line[end:]
		if le := bytes.Index(rest, []byte(`le="`)); le >= 0 && rest[0] == '{' {
			// A histogram's buckets are kept apart, by their bound.
			bound := rest[le+4:]
			name += "|" + string(bound[:bytes.IndexByte(bound, '"')])
		}
		if rest[0] == '{' {
			// A label value may hold a space but the value after the
			// labels holds no brace.
			rest = rest[bytes.LastIndexByte(rest, '}')+1:]
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(string(f[0]), 64)
		if err != nil {
			return nil, fmt.Errorf("value of %q: %w", line, err)
		}
		sums[name] += v
	}
	return sums, sc.Err()
}

// longestGap is KeepaliveGapMS from two readings of the gap histogram's
// cumulative buckets: the smallest bound that holds every renewal of the
// window.
func longestGap(first, last map[string]float64) int64 {
	prefix := famGap + "|"
	total := last[prefix+"+Inf"] - first[prefix+"+Inf"]
	if total <= 0 {
		return 0
	}
	best := math.Inf(1)
	for key, v := range last {
		bound, ok := strings.CutPrefix(key, prefix)
		if !ok || bound == "+Inf" || v-first[key] < total {
			continue
		}
		if le, err := strconv.ParseFloat(bound, 64); err == nil {
			best = min(best, le)
		}
	}
	if math.IsInf(best, 1) {
		return -1
	}
	return int64(best * 1000)
}

// printSweep prints the sweep's steps and knee and the overload's figures.
func (r *runResult) printSweep(w io.Writer) {
	if len(r.Sweep) > 0 {
		fmt.Fprintf(w, "  sweep, %.0f s a step (acked latencies):\n", r.Sweep[0].DurationS)
		fmt.Fprintf(w, "    %9s %9s %9s %9s %7s %8s %11s %13s\n", "PUB/s", "acked/s", "p50 ms", "p99 ms", "errors", "refused", "unanswered", "CPU µs/acked")
		for _, l := range r.Sweep {
			mark := ""
			if !l.withinKnee() {
				mark = "  beyond the knee"
			}
			fmt.Fprintf(w, "    %9.0f %9.0f %9.2f %9.2f %7d %8d %11d %13s%s\n", l.Rate, l.AckedPerSec,
				float64(l.P50us)/1000, float64(l.P99us)/1000, l.Errors, l.Refused, l.Unanswered, num(l.NodeCPUPerAckedUs, 0), mark)
		}
		if r.Knee > 0 {
			fmt.Fprintf(w, "  knee: %.0f PUB/s (the highest rate with acked p99 ≤ %v and nothing refused, failed or unanswered)\n", r.Knee, kneeP99)
		} else {
			fmt.Fprintf(w, "  knee: none, the lowest rate is beyond it\n")
		}
	}
	o := r.Overload
	if o == nil {
		return
	}
	l := o.Load
	fmt.Fprintf(w, "  overload: %.0f PUB/s (%g × the knee, %.0f) for %.0f s: %.0f acked/s while it lasted (%.2f of the knee); %d acked, %d refused, %d errors, %d unanswered; acked p50 %s, p99 %s, max %s; longest wait for an answer %s (schedule lag p99 %s)\n",
		l.Rate, o.Factor, o.Knee, l.DurationS, l.AckedPerSec, o.AckedOfKnee, l.Acked, l.Refused, l.Errors, l.Unanswered,
		ms(l.P50us), ms(l.P99us), ms(l.MaxUs), ms(l.MaxAnswerUs), ms(l.LagP99us))
	p := o.Probe
	fmt.Fprintf(w, "  recovery probe right after it: %.0f PUB/s for %.0f s: %d acked, %d refused, %d errors, %d unanswered\n",
		p.Rate, p.DurationS, p.Acked, p.Refused, p.Errors, p.Unanswered)
	var p99s, shed string
	shedding := false
	for _, s := range o.ProbeSeconds {
		if s.Acked > 0 {
			p99s += fmt.Sprintf(" %.1f", float64(s.P99us)/1000)
		} else {
			p99s += " -"
		}
		shed += fmt.Sprintf(" %d", s.Sent-s.Acked)
		shedding = shedding || s.Sent > s.Acked
	}
	fmt.Fprintf(w, "    acked p99 ms by second:%s\n", p99s)
	if shedding {
		fmt.Fprintf(w, "    not acked by second:   %s\n", shed)
	}
	if len(o.Checkpoints) > 0 {
		var cps []string
		for _, cp := range o.Checkpoints {
			cps = append(cps, fmt.Sprintf("node %d at %.1f s (took %.2f s)", cp.Node, cp.EndS, cp.TookS))
		}
		fmt.Fprintf(w, "    journal checkpoints, when each ended after the probe began: %s\n", strings.Join(cps, ", "))
	}
	if o.RecoveredS >= 0 {
		fmt.Fprintf(w, "    recovered: the PUBs due %d s after the overload were all acked within p99 %v\n", o.RecoveredS, kneeP99)
	} else {
		fmt.Fprintf(w, "    not recovered within the probe's %v\n", probeDuration)
	}
	if len(o.Nodes) == 0 {
		return
	}
	row := func(name string, v func(counterFigures) int64) {
		s := fmt.Sprintf("    %-34s", name)
		for i, n := range o.Nodes {
			if i > 0 {
				s += " /"
			}
			s += fmt.Sprintf(" %d", v(n))
		}
		fmt.Fprintf(w, "%s  (%d)\n", s, v(o.Total))
	}
	fmt.Fprintf(w, "  over the overload and the probe, node 1 / 2 / 3 (total), from /metrics:\n")
	row("ISR shrinks", func(c counterFigures) int64 { return c.ISRShrinks })
	row("registrations lost", func(c counterFigures) int64 { return c.RegistrationsLost })
	row("peer evictions", func(c counterFigures) int64 { return c.PeerEvictions })
	row("leader elections", func(c counterFigures) int64 { return c.LeaderElections })
	row("most partitions without a leader", func(c counterFigures) int64 { return c.MaxNoLeader })
	row("longest lease renewal gap, ms (≤)", func(c counterFigures) int64 { return c.KeepaliveGapMS })
	row("scrapes", func(c counterFigures) int64 { return int64(c.Scrapes) })
	for _, n := range o.Nodes {
		if n.ScrapeErrors > 0 || len(n.Missing) > 0 {
			fmt.Fprintf(w, "    node %d: %d scrapes failed (first: %s); not served: %v\n", n.Node, n.ScrapeErrors, n.FirstScrapeError, n.Missing)
		}
	}
}
