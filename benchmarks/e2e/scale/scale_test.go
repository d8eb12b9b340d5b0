package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestSmoke runs the whole driver against a real three-node cluster with 8
// partitions and short phases: it checks the driver works end to end, not
// the figures. NODE_BIN skips building the node from this checkout.
func TestSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "8", "--failover-timeout", "30s")
	if res.Create.WithLeader != 8 || res.Load.Acked == 0 || res.Failover.Recovered != res.Failover.Leaders || res.Failover.Leaders == 0 {
		t.Errorf("unexpected result %+v", res)
	}
	checkFailover(t, res.Failover)
	if res.Failover.Load != nil {
		t.Errorf("a failover load without --failover-load: %+v", res.Failover.Load)
	}
	for _, n := range res.Nodes {
		if n.Goroutines <= 0 || n.FDs <= 0 || n.RSSMiB <= 0 || n.IdleCPUPct < 0 {
			t.Errorf("node %d figures missing: %+v", n.Node, n)
		}
	}
}

// TestFailoverLoadSmoke kills a node under a steady load: the load's
// PUBs to the killed node are failover refusals, not errors, the rest
// are acked, and every partition the node led takes a PUB through both
// survivors, the load running 2 s before the kill. Its probe has one
// connection a survivor and one PUB unanswered at a time on it.
func TestFailoverLoadSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "8", "--skip-load", "--failover-timeout", "30s", "--failover-load", "300",
		"--failover-lead", "2s", "--failover-connections", "2", "--failover-window", "1")
	f := res.Failover
	checkFailover(t, f)
	fl := f.Load
	if fl == nil {
		t.Fatal("no failover load figures")
	}
	if fl.Load.Rate != 300 || fl.Load.Acked == 0 || fl.Load.Errors != 0 || fl.Load.Unanswered != 0 || fl.AfterKillAcked == 0 ||
		fl.LeadS < 2 || fl.BeforeKillAcked == 0 || fl.ToKilled == 0 || fl.FailoverRefused < fl.ToKilled {
		t.Errorf("unexpected failover load figures %+v", *fl)
	}
	// The load ends with the probe, which lasts at least until the new
	// leaders take PUBs: more than the lead alone.
	if fl.Load.DurationS <= fl.LeadS || fl.Load.DurationS > fl.LeadS+30 {
		t.Errorf("load of %.1f s for a failover of %.1f s", fl.Load.DurationS, f.AllS)
	}
}

// checkFailover checks what every failover reports: the killed node's
// partitions back through each survivor, and the survivors' counters.
func checkFailover(t *testing.T, f failoverFigures) {
	t.Helper()
	checkProbe(t, f)
	if len(f.Survivors) != 2 {
		t.Fatalf("survivors' counters %+v", f.Survivors)
	}
	for _, n := range f.Survivors {
		if n.Node == f.Node || n.Scrapes < 2 || n.RegistrationsLost != 0 || len(n.Missing) > 0 {
			t.Errorf("survivor's counters %+v", n)
		}
	}
	// The killed node's partitions had their leaders elected before the
	// last of them took a PUB; only a survivor evicts.
	if tk := f.Takeover; tk == nil || tk.Rounds == 0 || tk.Elected < f.Leaders || tk.ElectedS <= 0 || tk.ElectedS > f.AllS ||
		(tk.EvictedS >= 0 && tk.EvictedBy == f.Node) {
		t.Errorf("takeover figures %+v for a failover of %d leaders, all back at %.2f s", tk, f.Leaders, f.AllS)
	}
}

// TestTakeoverFromLogs reads a failover's steps from node logs: only
// lines after the kill count, an eviction is the earliest, and rounds that
// elected nobody are left out.
func TestTakeoverFromLogs(t *testing.T) {
	killed := time.Date(2026, 12, 4, 19, 45, 53, 400e6, time.UTC)
	n1 := `time=2026-12-04T19:45:50.000Z level=INFO msg="failover round" lost=4 elected=4 unelected=0 conflicts=0 candidates=2 asked_in=1ms stored_in=2ms took=3ms
time=2026-12-04T19:45:53.406Z level=WARN msg="replication session to a peer broke" node=n3 err="replication: stream ended"
time=2026-12-04T19:45:53.610Z level=WARN msg="peer's cluster port refuses connections: its process is gone, so its registration is revoked and its partitions fail over now" node=n3 session="x"
time=2026-12-04T19:45:54.104Z level=INFO msg="failover round" lost=3349 elected=3000 unelected=0 conflicts=0 candidates=2 asked_in=140ms stored_in=313ms took=1.218s
time=2026-12-04T19:45:54.900Z level=DEBUG msg="failover round" lost=3 elected=0 unelected=3 conflicts=0 candidates=2 asked_in=1ms stored_in=0s took=2ms
time=2026-12-04T19:45:55.104Z level=INFO msg="failover round" lost=349 elected=349 unelected=0 conflicts=0 candidates=2 asked_in=10ms stored_in=31ms took=45ms
`
	n2 := `time=2026-12-04T19:45:53.990Z level=WARN msg="peer's cluster port refuses connections: its process is gone, so its registration is revoked and its partitions fail over now" node=n3 session="x"
`
	tk := newTakeover()
	tk.read(strings.NewReader(n2), killed, 2)
	tk.read(strings.NewReader(n1), killed, 1)
	want := takeoverFigures{EvictedS: 0.21, EvictedBy: 1, ElectedS: 1.704, Rounds: 2, Elected: 3349, LongestRoundS: 1.218}
	near := func(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }
	if !near(tk.EvictedS, want.EvictedS) || tk.EvictedBy != want.EvictedBy || !near(tk.ElectedS, want.ElectedS) || tk.Rounds != want.Rounds ||
		tk.Elected != want.Elected || !near(tk.LongestRoundS, want.LongestRoundS) {
		t.Errorf("got %+v, want %+v", *tk, want)
	}
	none := newTakeover()
	none.read(strings.NewReader(n1), killed.Add(time.Hour), 1)
	if none.String() != "no eviction logged; no failover round logged" {
		t.Errorf("nothing after the kill reads %q", none.String())
	}
}

// checkProbe checks the probe's figures: every partition the killed node
// led back through each survivor, the slowest listed last first.
func checkProbe(t *testing.T, f failoverFigures) {
	t.Helper()
	if f.Leaders == 0 || f.Recovered != f.Leaders || f.AllS <= 0 || f.EitherAllS <= 0 || f.EitherAllS > f.AllS || len(f.Via) != 2 {
		t.Errorf("unexpected failover figures %+v", f)
	}
	for _, v := range f.Via {
		if v.Node == f.Node || v.Recovered != f.Leaders || v.AllS > f.AllS {
			t.Errorf("through node %d: %+v", v.Node, v)
		}
	}
	if len(f.Slowest) == 0 || f.Slowest[0].OKS != f.AllS {
		t.Errorf("slowest probes %+v, want the last at %.2f s first", f.Slowest, f.AllS)
	}
	for _, s := range f.Slowest {
		if s.SentS > s.OKS || s.Via == f.Node || (s.Refusal != "" && s.RefusedS > s.OKS) {
			t.Errorf("slow probe %+v", s)
		}
	}
}

// TestFailoverLoadAnswers checks how the failover load's answers are
// sorted: PUBs to the killed node and refusals after the kill are
// failover refusals, the same refusals before it are not.
func TestFailoverLoadAnswers(t *testing.T) {
	const victim = 2
	kill := 2 * time.Second
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	run := &loadRun{conns: 3, span: 4 * time.Second,
		segs:   []segmentRun{{segment: segment{10, 4 * time.Second}, scheduled: 11}},
		sentTo: map[int]int64{1: 4, 2: 4, 3: 3},
		answers: []answer{
			{due: 0, wait: sec(0.001), out: outAcked, node: 1},
			{due: sec(3), wait: sec(0.1), out: outAcked, node: 3},
			{due: sec(1), wait: sec(0.001), out: outAcked, node: victim},
			{due: sec(2.5), out: outLost, node: victim},
			{due: sec(1), wait: sec(0.01), out: outRefused, node: 1},
			{due: sec(1.9), wait: sec(0.2), out: outRefused, node: 3},
			{due: sec(3), wait: sec(0.01), out: outNotWritable, node: 1},
			{due: sec(0.5), wait: sec(0.01), out: outNotWritable, node: 3},
			{due: sec(3), wait: sec(0.01), out: outError, node: 1},
		}}
	fl := failoverLoad(run, victim, kill, false)
	l := fl.Load
	if l.Sent != 11 || l.Acked != 3 || l.Refused != 1 || l.Errors != 2 || l.Unanswered != 0 {
		t.Errorf("load %+v", l)
	}
	// The lost PUB, two never answered by the killed node, a refusal and
	// a not-writable answered after the kill.
	if fl.FailoverRefused != 5 || fl.ToKilled != 3 {
		t.Errorf("failover refusals %d, to the killed node %d; want 5 and 3", fl.FailoverRefused, fl.ToKilled)
	}
	if fl.AfterKillAcked != 1 || fl.AfterKillP99us != 100000 || fl.LeadS != 2 {
		t.Errorf("after the kill %+v", fl)
	}
	if fl.BeforeKillAcked != 2 || fl.BeforeKillP50us != 1000 || fl.BeforeKillP99us != 1000 {
		t.Errorf("before the kill %+v", fl)
	}
	// JetStream answers a publish to a stream without a leader with an
	// error: after the kill it is the failover's, before it not.
	// The not-writable before the kill stays an error.
	run.answers = append(run.answers, answer{due: sec(0.5), wait: sec(0.01), out: outError, node: 3})
	run.sentTo[3]++
	run.segs[0].scheduled++
	js := failoverLoad(run, victim, kill, true)
	if js.Load.Errors != 2 || js.FailoverRefused != 6 || js.Load.Unanswered != 0 {
		t.Errorf("JetStream: errors %d, failover refusals %d, unanswered %d; want 2, 6 and 0", js.Load.Errors, js.FailoverRefused, js.Load.Unanswered)
	}
}

// TestMoveSmoke runs the move phase at 8 MiB, moved at 4 MB/s so the
// 1-second load lies within it.
func TestMoveSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "4", "--skip-failover", "--load-duration", "1s",
		"--move-mib", "8", "--node-args", "--catchup-rate-limit 4000000")
	m := res.Move
	if m.Seconds < 1 || !m.LoadWithin || m.From == "" || m.To == "" || m.From == m.To || m.Load.Acked == 0 || res.Load.Acked == 0 {
		t.Errorf("unexpected move figures %+v", m)
	}
}

// TestSweepSmoke runs a two-step sweep and an overload at twice its knee:
// at N = 8 neither rate is beyond the knee, so it checks that the figures
// are filled in, not that the node sheds load.
func TestSweepSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "8", "--skip-failover", "--sweep", "200,400", "--sweep-duration", "2s",
		"--overload", "2", "--overload-duration", "3s", "--consume", "--node-args", "--journal-checkpoint=1s")
	if len(res.Sweep) == 0 || res.Knee <= 0 {
		t.Errorf("no knee: %+v", res.Sweep)
	}
	var acked int64
	for _, l := range res.Sweep {
		acked += l.Acked
	}
	if res.Consumed < acked {
		t.Errorf("the consumers finished %d messages, fewer than the sweep's %d acked", res.Consumed, acked)
	}
	for _, l := range res.Sweep {
		if l.NodeCPUPerAckedUs <= 0 {
			t.Errorf("sweep step at %.0f PUB/s without the servers' CPU per acked PUB", l.Rate)
		}
	}
	o := res.Overload
	if o == nil {
		t.Fatal("no overload figures")
	}
	if o.Knee != res.Knee || o.Load.Rate != 2*res.Knee || o.Load.Acked == 0 || o.Load.AckedPerSec <= 0 || o.Load.MaxAnswerUs <= 0 ||
		o.Probe.Acked == 0 || len(o.ProbeSeconds) == 0 || o.RecoveredS < 0 {
		t.Errorf("unexpected overload figures %+v", *o)
	}
	if len(o.Nodes) != 3 || o.Total.Scrapes < 3*2 || len(o.Nodes[0].Missing) > 0 {
		t.Errorf("unexpected /metrics figures %+v", o.Nodes)
	}
	// Checkpoints every second: each node logs some in the 13 s.
	seen := map[int]bool{}
	for _, cp := range o.Checkpoints {
		seen[cp.Node] = true
		if cp.EndS < -3 || cp.EndS > 15 || cp.TookS < 0 {
			t.Errorf("checkpoint %+v outside the overload and its probe", cp)
		}
	}
	if len(seen) != 3 {
		t.Errorf("journal checkpoints of %d nodes, want all 3: %+v", len(seen), o.Checkpoints)
	}
}

func TestCheckpointsFromLogs(t *testing.T) {
	probe := time.Date(2026, 12, 5, 4, 39, 30, 0, time.UTC)
	log := `time=2026-12-05T04:38:20.000Z level=INFO msg="journal checkpoint" took=12ms
time=2026-12-05T04:39:10.500Z level=INFO msg="journal checkpoint" took=410ms
time=2026-12-05T04:39:33.020Z level=WARN msg="journal checkpoint could not remove the journal files it covered; the next one removes them" err=x
time=2026-12-05T04:39:34.091Z level=INFO msg="journal checkpoint" took=1.014s
`
	got := checkpointsFrom(strings.NewReader(log), 2, probe.Add(-60*time.Second), probe)
	want := []checkpointFigure{{Node: 2, EndS: -19.5, TookS: 0.41}, {Node: 2, EndS: 4.091, TookS: 1.014}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Node != want[i].Node || math.Abs(got[i].EndS-want[i].EndS) > 1e-6 || math.Abs(got[i].TookS-want[i].TookS) > 1e-6 {
			t.Errorf("checkpoint %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSumFamilies(t *testing.T) {
	text := `# HELP partita_isr_shrinks_total Followers removed.
# TYPE partita_isr_shrinks_total counter
partita_isr_shrinks_total{node="n1",partition="0",topic="a b"} 2
partita_isr_shrinks_total{node="n1",partition="1",topic="a}"} 3 1700000000000
partita_isr_shrinks_total_other 100
partita_peer_evictions_total{node="n1"} 1e+00
partita_cluster_partitions_without_leader 4
`
	got, err := sumFamilies(strings.NewReader(text), scrapedFamilies)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{famShrinks: 5, famEvictions: 1, famNoLeader: 4}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
}

// runSmoke runs the driver on a node built from this checkout (or NODE_BIN)
// with short phases and the given flags, and returns the run's JSON.
func runSmoke(t *testing.T, flags ...string) runResult {
	t.Helper()
	return runDriver(t, append([]string{"--node-bin", nodeBin(t), "--label", "smoke"}, flags...)...)
}

// nodeBin is NODE_BIN, or a node built from this checkout.
func nodeBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	if bin := os.Getenv("NODE_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "partita")
	build := exec.Command("go", "build", "-o", bin, "./cmd/node")
	build.Dir = filepath.Join("..", "..", "..")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the node: %v\n%s", err, out)
	}
	return bin
}

// natsBin is NATS_BIN, or nats-server built from the natsserver module,
// as scale.sh builds it.
func natsBin(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-server cluster")
	}
	if bin := os.Getenv("NATS_BIN"); bin != "" {
		return bin
	}
	bin := filepath.Join(t.TempDir(), "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	build.Dir = filepath.Join("..", "natsserver")
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nats-server: %v\n%s", err, out)
	}
	return bin
}

// runDriver runs the driver with short phases and the given flags, and
// returns the run's JSON.
func runDriver(t *testing.T, flags ...string) runResult {
	t.Helper()
	args := append([]string{"--settle", "500ms", "--idle-window", "2s",
		"--load-rate", "500", "--load-duration", "2s", "--workdir", t.TempDir()}, flags...)
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	ok, err := runAll(ctx, cfg, &out)
	t.Log(out.String())
	if err != nil || !ok {
		t.Fatalf("run failed: ok %v, err %v", ok, err)
	}
	var res runResult
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	return res
}

// TestNATSSmoke runs the default phases against three nats-servers with 8
// streams: every stream led, the idle figures read from the processes and
// the profiling port, the load acked, the killed server's streams
// published to through both survivors after the kill -9, and the
// survivors' liveness counters named as not measured rather than left at
// zero.
func TestNATSSmoke(t *testing.T) {
	res := runDriver(t, "--system", sysNATS, "--nats-bin", natsBin(t), "--partitions", "8")
	if res.System != sysNATS || res.Version == "" || res.Create.Topics != 8 || res.Create.WithLeader != 8 || res.Load.Acked != res.Load.Sent || res.Load.Sent == 0 {
		t.Errorf("unexpected result %+v", res)
	}
	led := 0
	for _, n := range res.Nodes {
		led += n.Leaders
		if n.Goroutines <= 0 || n.FDs <= 0 || n.RSSMiB <= 0 || n.IdleCPUPct < 0 {
			t.Errorf("server %d figures missing: %+v", n.Node, n)
		}
	}
	if led != 8 {
		t.Errorf("the servers lead %d streams, want 8", led)
	}
	checkProbe(t, res.Failover)
	if len(res.Failover.Survivors) != 0 {
		t.Errorf("liveness counters of nats-servers: %+v", res.Failover.Survivors)
	}
	if !slices.ContainsFunc(res.NotMeasured, func(s string) bool { return strings.Contains(s, "liveness counters") }) {
		t.Errorf("the survivors' counters are not named as not measured: %q", res.NotMeasured)
	}
}

// TestNATSFailoverLoadSmoke kills a nats-server under a steady load: the
// publishes to it and those JetStream fails after the kill are failover
// refusals, the rest are acked.
func TestNATSFailoverLoadSmoke(t *testing.T) {
	res := runDriver(t, "--system", sysNATS, "--nats-bin", natsBin(t), "--partitions", "8", "--skip-load",
		"--failover-timeout", "30s", "--failover-load", "300")
	checkProbe(t, res.Failover)
	fl := res.Failover.Load
	if fl == nil {
		t.Fatal("no failover load figures")
	}
	if fl.Load.Acked == 0 || fl.Load.Errors != 0 || fl.Load.Unanswered != 0 || fl.AfterKillAcked == 0 || fl.ToKilled == 0 {
		t.Errorf("unexpected failover load figures %+v", *fl)
	}
}

// TestNATSSweepSmoke runs a sweep and an overload against three
// nats-servers: the knee is found as for Partita, and the overload runs
// without Partita's node counters, saying so.
func TestNATSSweepSmoke(t *testing.T) {
	res := runDriver(t, "--system", sysNATS, "--nats-bin", natsBin(t), "--partitions", "8", "--skip-failover",
		"--sweep", "200,400", "--sweep-duration", "2s", "--overload", "2", "--overload-duration", "2s")
	if len(res.Sweep) == 0 || res.Knee <= 0 || res.Sweep[0].NodeCPUPerAckedUs <= 0 {
		t.Errorf("sweep %+v, knee %v", res.Sweep, res.Knee)
	}
	o := res.Overload
	if o == nil || o.Load.Acked == 0 || o.Probe.Acked == 0 || len(o.Nodes) != 0 {
		t.Fatalf("unexpected overload figures %+v", o)
	}
	if !slices.ContainsFunc(res.NotMeasured, func(s string) bool { return strings.Contains(s, "node counters") }) {
		t.Errorf("the node counters are not named as not measured: %q", res.NotMeasured)
	}
}

// TestLoadAnswers checks that a refusal is told apart from an error, and
// that answers fall in the segment and second their PUBs were due in.
func TestLoadAnswers(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	start := time.Now().Add(-5 * time.Second)
	lc := &loadConn{start: start, queue: make(chan pending, 4)}
	prod := newNSQProducer(lc, &pubConn{c: client, r: bufio.NewReader(client), w: bufio.NewWriter(client)})
	lc.prod = prod
	frames := []struct {
		typ  uint32
		text string
	}{{0, "OK"}, {1, refusedCode + " too many publishes waiting"}, {1, "E_PUB_FAILED boom"}}
	go func() {
		// Closed once every frame is answered: the producer's reader
		// then ends.
		defer server.Close()
		r := bufio.NewReader(server)
		for _, f := range frames {
			var size [4]byte
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			if _, err := io.ReadFull(r, size[:]); err != nil {
				return
			}
			if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(f.text)))
			frame = binary.BigEndian.AppendUint32(frame, f.typ)
			server.Write(append(frame, f.text...))
		}
	}()
	read := make(chan struct{})
	go func() { prod.read(); close(read) }()
	dst := &partition{topic: "t"}
	for i := range frames {
		lc.queue <- pending{due: start.Add(time.Duration(i) * time.Second), dst: dst}
	}
	close(lc.queue)
	lc.write([]byte("x"))
	select {
	case <-read:
	case <-time.After(5 * time.Second):
		t.Fatal("the producer's reader did not end after the last answer")
	}
	if n := len(lc.answers); n != len(frames) {
		t.Fatalf("%d answers of %d", n, len(frames))
	}
	// Two segments: the first two seconds, and the third.
	run := &loadRun{conns: 1, span: 3 * time.Second, answers: lc.answers, firstError: lc.firstError, segs: []segmentRun{
		{segment: segment{1, 2 * time.Second}, scheduled: 2, perSecond: []int64{1, 1, 0}},
		{segment: segment{1, time.Second}, from: 2 * time.Second, scheduled: 2, perSecond: []int64{2, 0}},
	}}
	if l := run.figures(0); l.Acked != 1 || l.Refused != 1 || l.Errors != 0 || l.Unanswered != 0 || l.MaxAnswerUs < 4e6 {
		t.Errorf("first segment %+v", l)
	}
	if l := run.figures(1); l.Acked != 0 || l.Refused != 0 || l.Errors != 1 || l.Unanswered != 1 || l.FirstError != "E_PUB_FAILED boom" {
		t.Errorf("second segment %+v", l)
	}
	secs := run.seconds(0)
	if len(secs) != 2 || secs[0].Acked != 1 || secs[0].Refused != 0 || secs[1].Acked != 0 || secs[1].Refused != 1 || secs[1].S != 1 {
		t.Errorf("seconds %+v", secs)
	}
	if n := run.ackedWithin(0); n != 0 {
		t.Errorf("acked within the first segment: %d, but its answer came seconds after it", n)
	}
}

// The longest renewal gap is the smallest bucket bound holding every
// renewal of the window, -1 when one lies past the last bound.
func TestLongestGap(t *testing.T) {
	key := func(le string) string { return famGap + "|" + le }
	first := map[string]float64{key("0.1"): 0, key("1"): 10, key("2"): 10, key("+Inf"): 10}
	last := map[string]float64{key("0.1"): 0, key("1"): 14, key("2"): 15, key("+Inf"): 15}
	if got := longestGap(first, last); got != 2000 {
		t.Errorf("longest gap %d ms, want 2000 (one renewal between 1 s and 2 s)", got)
	}
	last[key("+Inf")] = 16
	if got := longestGap(first, last); got != -1 {
		t.Errorf("longest gap %d ms, want -1 (one renewal past the last bound)", got)
	}
	if got := longestGap(first, first); got != 0 {
		t.Errorf("longest gap %d ms with no renewal, want 0", got)
	}
}

// TestJSAnswers checks that JetStream acks, which come back in any order,
// are matched to their own publish's due time, that a publish the client
// timed out is an error, and that an answer to no publish is ignored.
func TestJSAnswers(t *testing.T) {
	start := time.Now().Add(-5 * time.Second)
	lc := &loadConn{start: start}
	p := &jsProducer{lc: lc, ackTimeout: 10 * time.Second, due: map[*nats.Msg]time.Time{}}
	first, second := &nats.Msg{Subject: "a"}, &nats.Msg{Subject: "b"}
	p.due[first], p.due[second] = start, start.Add(2*time.Second)
	p.answer(second, nil)
	p.answer(first, jetstream.ErrAsyncPublishTimeout)
	p.answer(&nats.Msg{Subject: "c"}, nil)
	p.answer(second, nil)
	if len(lc.answers) != 2 {
		t.Fatalf("answers %+v, want two", lc.answers)
	}
	if a := lc.answers[0]; a.out != outAcked || a.due != 2*time.Second || a.wait < 3*time.Second || a.wait > 4*time.Second {
		t.Errorf("the second publish's ack %+v", a)
	}
	if a := lc.answers[1]; a.out != outError || a.due != 0 || a.wait < 5*time.Second {
		t.Errorf("the first publish's timeout %+v", a)
	}
	if !strings.Contains(lc.firstError, "no ack within 10s") {
		t.Errorf("first error %q", lc.firstError)
	}
	if len(p.due) != 0 {
		t.Errorf("%d publishes still waiting", len(p.due))
	}
}

// TestParseSystems checks which runs --system asks for and what each
// system needs.
func TestParseSystems(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NODE_BIN", "")
	t.Setenv("NATS_BIN", "")
	cfg, err := parseFlags([]string{"--system=partita,nats3", "--node-bin=" + bin + "," + bin, "--label=a,b", "--nats-bin=" + bin}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []target{{sysPartita, bin, "a"}, {sysPartita, bin, "b"}, {sysNATS, bin, sysNATS}}
	if !slices.Equal(cfg.targets, want) {
		t.Errorf("targets %+v, want %+v", cfg.targets, want)
	}
	if cfg, err := parseFlags([]string{"--system=nats3", "--nats-bin=" + bin}, io.Discard); err != nil || len(cfg.targets) != 1 {
		t.Errorf("nats3 alone, without a node binary: %+v, %v", cfg.targets, err)
	}
	for _, args := range [][]string{
		{"--system=nats3"},
		{"--system=nats3", "--nats-bin=" + bin, "--move-mib=8"},
		{"--system=kafka", "--node-bin=" + bin},
		{"--system=partita,nats3", "--nats-bin=" + bin},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// TestParseFailoverLoad checks --failover-load's rate, its "knee", and
// what it cannot go with.
func TestParseFailoverLoad(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"--node-bin=" + bin, "--failover-load=500"}, io.Discard)
	if err != nil || cfg.failoverLoad != 500 || cfg.failoverAtKnee {
		t.Errorf("--failover-load=500: %v, %v, %v", cfg.failoverLoad, cfg.failoverAtKnee, err)
	}
	for _, args := range [][]string{{"--failover-load=knee", "--sweep=100,200"}, {"--failover-load=knee", "--knee=100"}} {
		if cfg, err := parseFlags(append(args, "--node-bin="+bin), io.Discard); err != nil || !cfg.failoverAtKnee {
			t.Errorf("%q: %v, %v", args, cfg.failoverAtKnee, err)
		}
	}
	for _, args := range [][]string{
		{"--failover-load=knee"},
		{"--failover-load=500", "--skip-failover"},
		{"--failover-load=-1"},
		{"--failover-load=fast"},
		{"--knee=100"},
	} {
		if _, err := parseFlags(append(args, "--node-bin="+bin), io.Discard); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}
