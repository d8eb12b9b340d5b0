package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

type nodeFigures struct {
	Node       int     `json:"node"`
	Leaders    int     `json:"leaders"`
	IdleCPUPct float64 `json:"idle_cpu_pct"` // of one core
	RSSMiB     float64 `json:"rss_mib"`
	Goroutines int     `json:"goroutines"`
	FDs        int     `json:"fds"`
	// From the node's log over the whole run: a cluster that churns
	// (registrations lost, leaders re-elected) shows it here first.
	LogWarnings int    `json:"log_warnings"`
	LogErrors   int    `json:"log_errors"`
	TopWarning  string `json:"top_warning,omitempty"`
	Error       string `json:"error,omitempty"`
}

// loadFigures are one open-loop PUB load's answers and latencies. The
// percentiles are of the acked PUBs: a refusal comes back fast by design
// and would flatter them.
type loadFigures struct {
	Rate        float64 `json:"rate"`
	DurationS   float64 `json:"duration_s"`
	Connections int     `json:"connections"`
	Sent        int64   `json:"sent"`
	Acked       int64   `json:"acked"`
	Refused     int64   `json:"refused"` // answered E_PUB_TOO_MUCH_WAITING
	Errors      int64   `json:"errors"`  // any other error answer, or no answer possible (write failed)
	Unanswered  int64   `json:"unanswered"`
	AckedPerSec float64 `json:"acked_per_s"`
	P50us       int64   `json:"p50_us"`
	P99us       int64   `json:"p99_us"`
	P999us      int64   `json:"p999_us"`
	MaxUs       int64   `json:"max_us"`
	// MaxAnswerUs is the longest any PUB waited for whatever answer it
	// got: a client's worst wait, refusals included.
	MaxAnswerUs int64  `json:"max_answer_us"`
	LagP99us    int64  `json:"schedule_lag_p99_us"`
	FirstError  string `json:"first_error,omitempty"`
	// NodeCPUPerAckedUs is the servers' CPU time (user and system, every
	// process) from the load's start until its answers were in, over the
	// PUBs acked: what a message costs the cluster. 0 when not measured.
	NodeCPUPerAckedUs float64 `json:"node_cpu_per_acked_us,omitempty"`
}

// withinKnee is the sweep's bound on a step: everything acked, in time.
func (l loadFigures) withinKnee() bool {
	return l.Acked > 0 && l.P99us <= kneeP99.Microseconds() && l.Errors == 0 && l.Refused == 0 && l.Unanswered == 0
}

// secondFigures are the PUBs due in one second of a load.
type secondFigures struct {
	S          int   `json:"s"` // since the load's segment began
	Sent       int64 `json:"sent"`
	Acked      int64 `json:"acked"`
	Refused    int64 `json:"refused"`
	Errors     int64 `json:"errors"`
	Unanswered int64 `json:"unanswered"`
	P99us      int64 `json:"p99_us"` // of the acked
}

type runResult struct {
	Time   string `json:"time"`
	Label  string `json:"label"`
	System string `json:"system"` // partita or nats3
	Binary string `json:"binary"`
	// Version is the server's own (nats-server --version); a Partita
	// build is named by its label.
	Version string `json:"version,omitempty"`
	// Partitions is N: Partita partitions, or with nats3 JetStream
	// streams, one subject each.
	Partitions int `json:"partitions"`
	Replicas   int `json:"replicas"`
	Create     struct {
		Topics     int     `json:"topics"` // with nats3, the streams`
		Created    int     `json:"created"`
		Errors     int     `json:"errors"`
		NotTried   int     `json:"not_tried,omitempty"`
		Seconds    float64 `json:"seconds"`   // first create sent to last answered
		LeadersS   float64 `json:"leaders_s"` // first create sent until /lookup shows every leader; -1 never
		WithLeader int     `json:"with_leader"`
		FirstError string  `json:"first_error,omitempty"`
	} `json:"create"`
	MachineBusyPct float64         `json:"machine_busy_pct"` // all cores, during the idle window
	LoadAvg        string          `json:"loadavg"`          // /proc/loadavg as the idle window ended
	Nodes          []nodeFigures   `json:"nodes"`
	Load           loadFigures     `json:"load"`
	Failover       failoverFigures `json:"failover"`
	Move           moveFigures     `json:"move"`
	// Sweep are the --sweep steps run, up to the first beyond the knee;
	// Knee is the highest rate within it (0: none).
	Sweep    []loadFigures    `json:"sweep,omitempty"`
	Knee     float64          `json:"knee,omitempty"`
	Overload *overloadFigures `json:"overload,omitempty"`
	// Consumed is what --consume's consumers FINished over the run.
	Consumed int64 `json:"consumed,omitempty"`
	// NotMeasured names what this system's run has no figure for, so the
	// zeros in its place are not read as none.
	NotMeasured []string `json:"not_measured,omitempty"`
	Failures    []string `json:"failures,omitempty"`
}

func newResult(cfg config, t target, version string, n int) runResult {
	r := runResult{Time: time.Now().UTC().Format(time.RFC3339), Label: t.label, System: t.system, Binary: t.bin, Version: version,
		Partitions: n, Replicas: cfg.replicas}
	for i := 1; i <= 3; i++ {
		r.Nodes = append(r.Nodes, nodeFigures{Node: i, Goroutines: -1, FDs: -1, RSSMiB: -1, IdleCPUPct: -1})
	}
	return r
}

func (r *runResult) fail(s string) { r.Failures = append(r.Failures, s) }

func (r *runResult) notMeasured(s string) { r.NotMeasured = append(r.NotMeasured, s) }

// topicsWord is what a run creates: topics of partitions, or streams.
func (r *runResult) topicsWord() string {
	if r.System == sysNATS {
		return "streams"
	}
	return "topics"
}

// title names the run's system and build, and what N counts.
func (r *runResult) title() string {
	if r.System == sysNATS {
		v := r.Version
		if v == "" {
			v = "version unknown"
		}
		return fmt.Sprintf("%s (NATS JetStream, nats-server %s), N=%d streams × %d replicas (one subject each)", r.Label, v, r.Partitions, r.Replicas)
	}
	return fmt.Sprintf("%s (Partita), N=%d partitions × %d replicas (%d topics)", r.Label, r.Partitions, r.Replicas, r.Create.Topics)
}

func (r *runResult) jsonLine() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func (r *runResult) printTable(w io.Writer) {
	c := r.Create
	fmt.Fprintf(w, "\n%s\n", r.title())
	leaders := "never"
	if c.LeadersS >= 0 {
		leaders = fmt.Sprintf("%.1f s", c.LeadersS)
	}
	fmt.Fprintf(w, "  creation: %.1f s for %d of %d %s, %d errors; every %s led after %s (%d led)\n",
		c.Seconds, c.Created, c.Topics, r.topicsWord(), c.Errors, strings.TrimSuffix(r.unitWord(), "s"), leaders, c.WithLeader)
	fmt.Fprintf(w, "  %-6s %8s %12s %9s %11s %6s\n", "node", "leaders", "idle CPU %", "RSS MiB", "goroutines", "fds")
	for _, n := range r.Nodes {
		fmt.Fprintf(w, "  %-6d %8d %12s %9s %11s %6s  %s\n", n.Node, n.Leaders, num(n.IdleCPUPct, 1), num(n.RSSMiB, 0),
			num(float64(n.Goroutines), 0), num(float64(n.FDs), 0), n.Error)
	}
	if r.LoadAvg != "" {
		fmt.Fprintf(w, "  machine %.0f%% busy (all cores) during the idle window; load average %s\n", r.MachineBusyPct, r.LoadAvg)
	}
	if l := r.Load; l.Sent > 0 {
		fmt.Fprintf(w, "  load: %.0f PUB/s for %.0f s over %d connections: %d acked (%.0f/s), %d refused, %d errors, %d unanswered; acked p50 %s, p99 %s, p99.9 %s, max %s; longest wait for an answer %s (schedule lag p99 %s); server CPU %s µs per acked PUB\n",
			l.Rate, l.DurationS, l.Connections, l.Acked, l.AckedPerSec, l.Refused, l.Errors, l.Unanswered,
			ms(l.P50us), ms(l.P99us), ms(l.P999us), ms(l.MaxUs), ms(l.MaxAnswerUs), ms(l.LagP99us), num(l.NodeCPUPerAckedUs, 0))
	}
	if m := r.Move; m.MiB > 0 {
		fmt.Fprintf(w, "  move: %d MiB filled in %.1f s; replica %s → %s in %.1f s (%.1f MiB/s)\n", m.MiB, m.FillS, m.From, m.To, m.Seconds, m.MiBPerS)
		if l := m.Load; l.Sent > 0 {
			fmt.Fprintf(w, "  load during the move: %d acked (%.0f/s), %d errors; p50 %s, p99 %s, p99.9 %s, max %s (without: p50 %s, p99 %s, p99.9 %s, max %s)\n",
				l.Acked, l.AckedPerSec, l.Errors, ms(l.P50us), ms(l.P99us), ms(l.P999us), ms(l.MaxUs),
				ms(r.Load.P50us), ms(r.Load.P99us), ms(r.Load.P999us), ms(r.Load.MaxUs))
		}
	}
	r.printSweep(w)
	r.printFailover(w)
	for _, n := range r.Nodes {
		if n.LogWarnings+n.LogErrors > 0 {
			fmt.Fprintf(w, "  node %d log: %d warnings, %d errors; most frequent: %s\n", n.Node, n.LogWarnings, n.LogErrors, n.TopWarning)
		}
	}
	for _, s := range r.NotMeasured {
		fmt.Fprintf(w, "  not measured for %s: %s\n", r.System, s)
	}
	for _, f := range r.Failures {
		fmt.Fprintf(w, "  FAILED: %s\n", f)
	}
}

// unitWord is what N counts.
func (r *runResult) unitWord() string {
	if r.System == sysNATS {
		return "streams"
	}
	return "partitions"
}

// printSummary is one line per run, for the README's table. The knee and
// overload columns appear only when some run has them, so the table of a
// run without --sweep or --overload is as it always was.
func printSummary(w io.Writer, rs []runResult) {
	var knee, over, mixed bool
	for _, r := range rs {
		knee = knee || len(r.Sweep) > 0
		over = over || r.Overload != nil
		mixed = mixed || r.System != rs[0].System
	}
	// A system column only when systems were set side by side, so the
	// table of a Partita-only run is as it always was.
	sysHead, sysRule := "", ""
	if mixed {
		sysHead, sysRule = " system |", "---|"
	}
	head, rule := "", ""
	if knee {
		head, rule = head+" knee PUB/s |", rule+"---|"
	}
	if over {
		head, rule = head+" overload acked/s (of knee), refused, recovered s |", rule+"---|"
	}
	fmt.Fprintf(w, "\n| build |%s N | create s | led s | idle CPU %% (n1/n2/n3) | RSS MiB | goroutines | fds | PUB p50 / p99 ms | failover s |%s\n", sysHead, head)
	fmt.Fprintf(w, "|---|%s---|---|---|---|---|---|---|---|---|%s\n", sysRule, rule)
	for _, r := range rs {
		sys := ""
		if mixed {
			sys = " " + systemName[r.System] + " |"
		}
		var cpu, rss, gor, fds string
		for i, n := range r.Nodes {
			sep := ""
			if i > 0 {
				sep = " / "
			}
			cpu += sep + num(n.IdleCPUPct, 1)
			rss += sep + num(n.RSSMiB, 0)
			gor += sep + num(float64(n.Goroutines), 0)
			fds += sep + num(float64(n.FDs), 0)
		}
		led := "never"
		if r.Create.LeadersS >= 0 {
			led = fmt.Sprintf("%.1f", r.Create.LeadersS)
		}
		fo := "-"
		if f := r.Failover; f.Leaders > 0 {
			if f.AllS >= 0 {
				fo = fmt.Sprintf("%.2f (%d)", f.AllS, f.Leaders)
			} else {
				fo = fmt.Sprintf("%d of %d never", f.Leaders-f.Recovered, f.Leaders)
			}
			if l := f.Load; l != nil {
				fo += fmt.Sprintf("; under %.0f PUB/s: p99 %.0f ms, %d failover refusals", l.Load.Rate, float64(l.Load.P99us)/1000, l.FailoverRefused)
			}
		}
		pub := "-"
		if r.Load.Sent > 0 {
			pub = fmt.Sprintf("%.2f / %.2f", float64(r.Load.P50us)/1000, float64(r.Load.P99us)/1000)
		}
		var extra string
		if knee {
			switch {
			case len(r.Sweep) == 0:
				extra += " - |"
			case r.Knee > 0:
				extra += fmt.Sprintf(" %.0f |", r.Knee)
			default:
				extra += fmt.Sprintf(" < %.0f |", r.Sweep[0].Rate)
			}
		}
		if over {
			if o := r.Overload; o != nil {
				rec := "never"
				if o.RecoveredS >= 0 {
					rec = strconv.Itoa(o.RecoveredS)
				}
				extra += fmt.Sprintf(" %.0f (%.2f), %d, %s |", o.Load.AckedPerSec, o.AckedOfKnee, o.Load.Refused, rec)
			} else {
				extra += " - |"
			}
		}
		fmt.Fprintf(w, "| %s |%s %d | %.1f | %s | %s | %s | %s | %s | %s | %s |%s\n", r.Label, sys, r.Partitions, r.Create.Seconds, led,
			cpu, rss, gor, fds, pub, fo, extra)
	}
}

func num(v float64, prec int) string {
	if v < 0 {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, v)
}

func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

// percentile is the nearest-rank percentile p (0 < p ≤ 100) of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func us(sorted []time.Duration, p float64) int64 { return percentile(sorted, p).Microseconds() }
