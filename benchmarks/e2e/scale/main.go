// Command scale measures how a three-node Partita cluster's cost grows with
// its partitions: for each N it starts a fresh cluster on loopback, creates
// N partitions × 3 replicas, and reports creation time, each node's idle
// CPU, RSS, goroutines and fds, a steady open-loop PUB load spread over
// every partition, and how long the partitions led by a kill -9ed node take
// to accept a PUB again. With --sweep it finds instead the highest rate the
// cluster carries within its bounds (the knee), and with --overload it
// publishes a multiple of that and watches the cluster cope and recover.
// With --system=nats3 it measures a three-server NATS JetStream cluster
// with N streams the same way, so the two can be set side by side.
//
//	scale --node-bin=/tmp/partita --partitions=1000,3000
//	scale --node-bin=/tmp/partita --partitions=1000 --sweep=1000,2500,5000,10000 --overload=2 --skip-failover
//	scale --system=partita,nats3 --node-bin=/tmp/partita --nats-bin=/tmp/nats-server --partitions=1000 --sweep=1000,2500,5000 --skip-failover
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// target is one system build to measure at every N.
type target struct {
	system string // sysPartita or sysNATS
	bin    string
	label  string
}

type config struct {
	targets          []target // each measured in turn for every N
	partitions       []int
	topicPartitions  int
	replicas         int
	createParallel   int
	createTimeout    time.Duration
	readyTimeout     time.Duration
	settle           time.Duration
	idleWindow       time.Duration
	loadRate         float64
	loadDuration     time.Duration
	loadDrain        time.Duration
	loadConns        int // per node
	msgSize          int
	failoverTimeout  time.Duration
	failoverLead     time.Duration
	failoverRetry    time.Duration
	failoverWorkers  int
	failoverWindow   int
	probeTrace       string
	failoverInflight int
	failoverAckWait  time.Duration
	failoverLoad     float64 // PUB/s during the failover; 0: none
	failoverAtKnee   bool    // failoverLoad is the knee's
	nodeArgs         []string
	workDir          string
	keep             bool
	skipLoad         bool
	skipFailover     bool
	moveMiB          int
	moveTimeout      time.Duration
	sweep            []float64 // ascending PUB rates; none: no sweep
	sweepDuration    time.Duration
	overload         float64 // multiple of the knee; 0: no overload
	overloadDuration time.Duration
	knee             float64 // for --overload without --sweep
	consume          bool
	consumeInFlight  int
	jsonOut          string
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	var systems, bins, labels, natsBin, natsLabel, parts, nodeArgs, sweep, failoverLoad string
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&systems, "system", sysPartita, "comma-separated systems to measure, one after the other for each N: partita (three Partita nodes, every --node-bin) and nats3 (three nats-servers, --nats-bin, N JetStream streams)")
	fs.StringVar(&bins, "node-bin", os.Getenv("NODE_BIN"), "comma-separated Partita node binaries to measure, one after the other for each N (default $NODE_BIN)")
	fs.StringVar(&labels, "label", "", "comma-separated names of the binaries in the output (default: their file names)")
	fs.StringVar(&natsBin, "nats-bin", os.Getenv("NATS_BIN"), "nats-server binary for --system=nats3 (default $NATS_BIN)")
	fs.StringVar(&natsLabel, "nats-label", sysNATS, "name of the NATS JetStream runs in the output")
	fs.StringVar(&parts, "partitions", "1000,3000", "comma-separated partition counts N, one fresh cluster each")
	fs.IntVar(&cfg.topicPartitions, "topic-partitions", 4, "partitions per topic")
	fs.IntVar(&cfg.replicas, "replicas", 3, "replicas per partition")
	fs.IntVar(&cfg.createParallel, "create-parallel", 8, "topic creations in flight at once")
	fs.DurationVar(&cfg.createTimeout, "create-timeout", 10*time.Minute, "stop starting new creations after this long")
	fs.DurationVar(&cfg.readyTimeout, "ready-timeout", 3*time.Minute, "longest wait after creation for /lookup to show a leader for every partition")
	fs.DurationVar(&cfg.settle, "settle", 10*time.Second, "wait after every partition has a leader before measuring idle")
	fs.DurationVar(&cfg.idleWindow, "idle-window", 20*time.Second, "window over which idle CPU is measured")
	fs.Float64Var(&cfg.loadRate, "load-rate", 10000, "PUBs per second of the steady load, over all partitions")
	fs.DurationVar(&cfg.loadDuration, "load-duration", 20*time.Second, "length of the steady load")
	fs.DurationVar(&cfg.loadDrain, "load-drain", 10*time.Second, "how long to wait for answers after the load's last PUB")
	fs.IntVar(&cfg.loadConns, "load-connections", 4, "producer connections to each node during the load")
	fs.IntVar(&cfg.msgSize, "size", 200, "message body size in bytes")
	fs.DurationVar(&cfg.failoverTimeout, "failover-timeout", 90*time.Second, "give up on partitions not accepting a PUB this long after the kill")
	fs.DurationVar(&cfg.failoverLead, "failover-lead", defaultFailoverLead, "how long --failover-load runs before the kill")
	fs.DurationVar(&cfg.failoverRetry, "failover-retry", 100*time.Millisecond, "how often each partition of the killed node is tried again")
	fs.IntVar(&cfg.failoverWorkers, "failover-connections", 32, "connections probing the killed node's partitions at once, split over the surviving nodes")
	fs.IntVar(&cfg.failoverWindow, "failover-window", 0, "PUBs a probing connection has unanswered at once (0: every partition of its share, each pass)")
	fs.StringVar(&cfg.probeTrace, "probe-trace", "", "write every failover probe answer to this file: via node, connection, partition, sent and answered (s after the kill), refusal")
	fs.DurationVar(&cfg.failoverAckWait, "failover-ack-wait", 5*time.Second, "how long a probe pass waits for its answers (a JetStream publish for its ack, as nats.go's default timeout) before it counts the rest as failed and tries them again")
	fs.IntVar(&cfg.failoverInflight, "failover-inflight", 0, "probe as an asynchronous producer instead of in passes: at most this many PUBs unanswered on a connection, a refused partition tried again --failover-retry after its refusal (0: in passes, as --failover-window says)")
	fs.StringVar(&failoverLoad, "failover-load", "0", "PUB/s of a steady load over every partition from 3 s before the kill until the probe ends, or \"knee\" for the sweep's knee (or --knee); 0: none")
	fs.StringVar(&nodeArgs, "node-args", "", "extra flags for every node, space-separated")
	fs.StringVar(&cfg.workDir, "workdir", "", "where clusters keep data and logs (default: a new temporary directory, removed at exit); must be a disk")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the data and logs")
	fs.BoolVar(&cfg.skipLoad, "skip-load", false, "skip the steady load")
	fs.BoolVar(&cfg.skipFailover, "skip-failover", false, "skip the kill -9")
	fs.IntVar(&cfg.moveMiB, "move-mib", 0, "fill a partition of two replicas with this many MiB and move its follower's replica to the third node during a second steady load (0: no move phase)")
	fs.DurationVar(&cfg.moveTimeout, "move-timeout", 10*time.Minute, "give up on the move after this long")
	fs.StringVar(&sweep, "sweep", "", "comma-separated ascending PUB rates, each run as a steady load for --sweep-duration, 2 s apart, until one is beyond the knee (acked p99 over 50 ms, or any error, refusal or unanswered PUB); replaces the idle window and the steady load")
	fs.DurationVar(&cfg.sweepDuration, "sweep-duration", 10*time.Second, "length of each --sweep step")
	fs.BoolVar(&cfg.consume, "consume", false, "keep a go-nsq consumer on every topic, through every node, FINning what it gets, from before the first load to the end (Partita only)")
	fs.IntVar(&cfg.consumeInFlight, "consume-in-flight", 300, "with --consume: each topic's consumer's max in flight, shared over its three connections")
	fs.Float64Var(&cfg.overload, "overload", 0, "after the sweep, publish at this multiple of the knee for --overload-duration, then at min(knee/2, 1000) PUB/s for 10 s to see the recovery (0: no overload)")
	fs.DurationVar(&cfg.overloadDuration, "overload-duration", 60*time.Second, "length of the --overload load")
	fs.Float64Var(&cfg.knee, "knee", 0, "the knee, in PUB/s, that --overload multiplies when there is no --sweep to find it")
	fs.StringVar(&cfg.jsonOut, "json", "", "also append each run's JSON line to this file")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var wantPartita, wantNATS bool
	for _, sys := range strings.Split(systems, ",") {
		switch strings.TrimSpace(sys) {
		case sysPartita:
			wantPartita = true
		case sysNATS:
			wantNATS = true
		default:
			return cfg, fmt.Errorf("--system: %q is neither %s nor %s", sys, sysPartita, sysNATS)
		}
	}
	if wantPartita {
		var abs []string
		for _, b := range strings.Split(bins, ",") {
			if b = strings.TrimSpace(b); b != "" {
				a, err := regularFile(b, "--node-bin")
				if err != nil {
					return cfg, err
				}
				abs = append(abs, a)
			}
		}
		if len(abs) == 0 {
			return cfg, errors.New("--node-bin (or NODE_BIN) is required")
		}
		var names []string
		if labels != "" {
			names = strings.Split(labels, ",")
			if len(names) != len(abs) {
				return cfg, fmt.Errorf("--label names %d binaries, --node-bin %d", len(names), len(abs))
			}
		}
		for i, b := range abs {
			t := target{system: sysPartita, bin: b, label: filepath.Base(b)}
			if names != nil {
				t.label = names[i]
			}
			cfg.targets = append(cfg.targets, t)
		}
	}
	if wantNATS {
		if natsBin == "" {
			return cfg, errors.New("--nats-bin (or NATS_BIN) is required for --system=nats3")
		}
		b, err := regularFile(natsBin, "--nats-bin")
		if err != nil {
			return cfg, err
		}
		cfg.targets = append(cfg.targets, target{system: sysNATS, bin: b, label: natsLabel})
	}
	for _, p := range strings.Split(parts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("--partitions: %q is not a positive count", p)
		}
		cfg.partitions = append(cfg.partitions, n)
	}
	if sweep != "" {
		for _, r := range strings.Split(sweep, ",") {
			v, err := strconv.ParseFloat(strings.TrimSpace(r), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
				return cfg, fmt.Errorf("--sweep: %q is not a positive rate", r)
			}
			// The sweep stops at the first step beyond the knee, which
			// only finds it when the rates rise.
			if len(cfg.sweep) > 0 && v <= cfg.sweep[len(cfg.sweep)-1] {
				return cfg, fmt.Errorf("--sweep: rates must rise, %v does not", v)
			}
			cfg.sweep = append(cfg.sweep, v)
		}
	}
	if failoverLoad == "knee" {
		cfg.failoverAtKnee = true
	} else if v, err := strconv.ParseFloat(failoverLoad, 64); err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return cfg, fmt.Errorf("--failover-load: %q is neither a rate nor \"knee\"", failoverLoad)
	} else {
		cfg.failoverLoad = v
	}
	cfg.nodeArgs = strings.Fields(nodeArgs)
	switch {
	case cfg.topicPartitions < 1 || cfg.replicas < 1 || cfg.createParallel < 1 || cfg.loadConns < 1 || cfg.failoverWorkers < 1 || cfg.failoverWindow < 0:
		return cfg, errors.New("counts must be positive")
	case cfg.replicas > 3:
		return cfg, errors.New("--replicas: the cluster has 3 nodes")
	case math.IsNaN(cfg.loadRate) || math.IsInf(cfg.loadRate, 0) || cfg.loadRate <= 0:
		return cfg, errors.New("--load-rate must be positive")
	case cfg.moveMiB < 0:
		return cfg, errors.New("--move-mib must not be negative")
	case cfg.moveMiB > 0 && cfg.skipLoad:
		return cfg, errors.New("--move-mib compares the steady load with and without a move: drop --skip-load")
	case cfg.idleWindow <= 0 || cfg.loadDuration <= 0 || cfg.failoverRetry <= 0 || cfg.failoverAckWait <= 0 || cfg.moveTimeout <= 0 ||
		cfg.sweepDuration <= 0 || cfg.overloadDuration <= 0:
		return cfg, errors.New("durations must be positive")
	case cfg.moveMiB > 0 && len(cfg.sweep) > 0:
		return cfg, errors.New("--move-mib compares against the steady load, which --sweep replaces")
	case cfg.moveMiB > 0 && wantNATS:
		return cfg, errors.New("--move-mib moves a Partita replica: it has no --system=nats3 counterpart")
	case math.IsNaN(cfg.overload) || math.IsInf(cfg.overload, 0) || cfg.overload < 0:
		return cfg, errors.New("--overload must be a positive factor, or 0")
	case math.IsNaN(cfg.knee) || math.IsInf(cfg.knee, 0) || cfg.knee < 0:
		return cfg, errors.New("--knee must be a positive rate")
	case cfg.knee > 0 && len(cfg.sweep) > 0:
		return cfg, errors.New("--knee is for --overload without --sweep; the sweep finds its own")
	case cfg.knee > 0 && cfg.overload == 0 && !cfg.failoverAtKnee:
		return cfg, errors.New("--knee is only used by --overload and --failover-load=knee")
	case cfg.overload > 0 && cfg.knee == 0 && len(cfg.sweep) == 0:
		return cfg, errors.New("--overload needs --sweep or --knee")
	case cfg.failoverAtKnee && cfg.knee == 0 && len(cfg.sweep) == 0:
		return cfg, errors.New("--failover-load=knee needs --sweep or --knee")
	case (cfg.failoverLoad > 0 || cfg.failoverAtKnee) && cfg.skipFailover:
		return cfg, errors.New("--failover-load loads the failover: drop --skip-failover")
	}
	return cfg, nil
}

// regularFile is path made absolute, once it is known to be a file.
func regularFile(path, flagName string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(abs); err != nil || st.IsDir() {
		return "", fmt.Errorf("%s %s is not a file", flagName, path)
	}
	return abs, nil
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ok, err := runAll(ctx, cfg, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// runAll measures every binary at every N and prints each run as it ends.
// It reports false when a run could not be completed as planned.
func runAll(ctx context.Context, cfg config, out io.Writer) (bool, error) {
	root := cfg.workDir
	if root == "" {
		var err error
		if root, err = os.MkdirTemp("", "partita-scale-"); err != nil {
			return false, err
		}
		if !cfg.keep {
			defer os.RemoveAll(root)
		}
	}
	var jsonFile *os.File
	if cfg.jsonOut != "" {
		var err error
		if jsonFile, err = os.OpenFile(cfg.jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
			return false, err
		}
		defer jsonFile.Close()
	}
	allOK := true
	var results []runResult
	versions := map[string]string{}
	for _, t := range cfg.targets {
		if t.system == sysNATS {
			versions[t.bin] = natsVersion(t.bin)
		}
	}
	for _, n := range cfg.partitions {
		for _, t := range cfg.targets {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			dir := filepath.Join(root, fmt.Sprintf("%s-n%d", t.label, n))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return false, err
			}
			fmt.Fprintf(out, "== %s (%s), N=%d (data and logs in %s)\n", t.label, systemName[t.system], n, dir)
			res := runOne(ctx, cfg, t, versions[t.bin], n, dir, out)
			res.printTable(out)
			line := res.jsonLine()
			fmt.Fprintln(out, line)
			if jsonFile != nil {
				fmt.Fprintln(jsonFile, line)
			}
			if len(res.Failures) > 0 {
				allOK = false
			}
			results = append(results, res)
			if !cfg.keep && cfg.workDir == "" {
				os.RemoveAll(dir)
			}
		}
	}
	if len(results) > 1 {
		printSummary(out, results)
	}
	return allOK, nil
}

// runOne is one N on one binary, on a fresh cluster that it stops before
// returning, whatever happened.
func runOne(ctx context.Context, cfg config, t target, version string, n int, dir string, out io.Writer) (res runResult) {
	res = newResult(cfg, t, version, n)
	logf := func(format string, args ...any) {
		fmt.Fprintf(out, "  %s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
	var c *cluster
	var err error
	if t.system == sysNATS {
		c, err = startNATS(ctx, t.bin, dir)
	} else {
		c, err = startCluster(ctx, t.bin, dir, cfg.nodeArgs)
	}
	if err != nil {
		res.fail("start: " + err.Error())
		return res
	}
	defer func() {
		logf("stopping the cluster")
		for _, p := range c.stop(60 * time.Second) {
			res.fail("stop: " + p)
		}
		for i, n := range c.nodes {
			res.Nodes[i].LogWarnings, res.Nodes[i].LogErrors, res.Nodes[i].TopWarning = logSummary(n.log)
		}
	}()
	checkDied := func(phase string) bool {
		for _, d := range c.died() {
			res.fail(phase + ": " + d)
		}
		return len(c.died()) > 0
	}
	createStart := time.Now()
	var topics []topic
	if c.system == sysNATS {
		logf("cluster up; creating %d streams (one subject each, %d replicas, file storage, %d at a time)", n, cfg.replicas, cfg.createParallel)
		topics = createStreams(ctx, c, cfg, n, &res)
	} else {
		logf("cluster up; creating %d partitions (%d topics of at most %d, %d replicas, %d at a time)",
			n, (n+cfg.topicPartitions-1)/cfg.topicPartitions, cfg.topicPartitions, cfg.replicas, cfg.createParallel)
		topics = createTopics(ctx, c, cfg, n, &res)
	}
	logf("creation: %d of %d %s in %.1f s, %d errors %s", res.Create.Created, res.Create.Topics, res.topicsWord(), res.Create.Seconds, res.Create.Errors, res.Create.FirstError)
	if checkDied("creation") || len(topics) == 0 {
		res.fail("no topic created")
		return res
	}
	if ctx.Err() != nil {
		res.fail("interrupted during creation")
		return res
	}
	parts, ready := waitLeaders(ctx, c, topics, cfg.readyTimeout)
	if ctx.Err() != nil {
		res.fail("interrupted while waiting for leaders")
		return res
	}
	res.Create.LeadersS = time.Since(createStart).Seconds()
	for _, p := range parts {
		if p.leader != 0 {
			res.Create.WithLeader++
		}
	}
	if !ready {
		res.Create.LeadersS = -1
		res.fail(fmt.Sprintf("only %d of %d %s had a leader %v after creation", res.Create.WithLeader, len(parts), res.unitWord(), cfg.readyTimeout))
	}
	logf("%d of %d %s have a leader, %.1f s after the first create", res.Create.WithLeader, len(parts), res.unitWord(), time.Since(createStart).Seconds())
	if checkDied("leaders") {
		return res
	}

	if c.system == sysNATS && (!cfg.skipLoad || len(cfg.sweep) > 0 || cfg.overload > 0) {
		res.notMeasured("refusals: JetStream has no answer that sheds a publish at once, as E_PUB_TOO_MUCH_WAITING does; a publish it fails or does not ack within --load-drain is an error")
	}
	if cfg.consume && c.system == sysPartita {
		cs, err := startConsumers(c, topics, cfg.consumeInFlight)
		if err != nil {
			res.fail("consumers: " + err.Error())
			return res
		}
		logf("consuming %s on %d topics through every node", consumeChannel, len(cs.all))
		defer func() {
			cs.stop()
			res.Consumed = cs.finished.Load()
			logf("consumers finished %d messages", res.Consumed)
		}()
	}
	// A sweep is run for the cluster under load: its idle window would
	// only lengthen it, and a run without --sweep gives the idle figures.
	sweeping := len(cfg.sweep) > 0
	if sweeping {
		logf("settling %v", cfg.settle)
	} else {
		logf("settling %v, then idle for %v", cfg.settle, cfg.idleWindow)
	}
	select {
	case <-ctx.Done():
		return res
	case <-time.After(cfg.settle):
	}
	if !sweeping {
		measureIdle(ctx, c, cfg.idleWindow, &res)
		if checkDied("idle") {
			return res
		}
	}
	// Leadership may have moved while settling; the load and the kill go
	// by the view after it.
	parts, err = c.leaders(ctx, topics)
	if err != nil {
		res.fail("lookup after idle: " + err.Error())
	}
	for _, p := range parts {
		if p.leader > 0 {
			res.Nodes[p.leader-1].Leaders++
		}
	}

	if cfg.moveMiB > 0 {
		logf("move phase: filling %s/0 (two replicas) with %d MiB", moveTopic, cfg.moveMiB)
		if !fillForMove(ctx, c, cfg, &res) {
			return res
		}
		logf("filled in %.1f s", res.Move.FillS)
	}
	if !cfg.skipLoad && !sweeping {
		logf("steady load: %.0f PUB/s over %d %s for %v", cfg.loadRate, len(parts), res.unitWord(), cfg.loadDuration)
		runLoad(ctx, c, parts, cfg, &res.Load)
		if res.Load.Errors > 0 || res.Load.Unanswered > 0 || res.Load.Acked == 0 {
			res.fail(fmt.Sprintf("load: %d errors, %d unanswered (first: %s)", res.Load.Errors, res.Load.Unanswered, res.Load.FirstError))
		}
		if checkDied("load") {
			return res
		}
	}
	if cfg.moveMiB > 0 {
		logf("the same load while %s/0's follower replica moves to the third node", moveTopic)
		runMove(ctx, c, parts, cfg, &res)
		m := res.Move
		logf("move %s → %s: %.1f s (%.1f MiB/s)", m.From, m.To, m.Seconds, m.MiBPerS)
		if m.Load.Errors > 0 || m.Load.Unanswered > 0 {
			res.fail(fmt.Sprintf("load during the move: %d errors, %d unanswered (first: %s)", m.Load.Errors, m.Load.Unanswered, m.Load.FirstError))
		}
		if checkDied("move") {
			return res
		}
	}
	if sweeping {
		logf("sweep: %v PUB/s, %v each, over %d %s", cfg.sweep, cfg.sweepDuration, len(parts), res.unitWord())
		runSweep(ctx, c, parts, cfg, &res, logf)
		if res.Knee > 0 {
			logf("knee: %.0f PUB/s", res.Knee)
		} else if len(res.Sweep) > 0 {
			l := res.Sweep[len(res.Sweep)-1]
			res.fail(fmt.Sprintf("sweep: the lowest rate, %.0f PUB/s, is beyond the knee: p99 %s, %d errors, %d refused, %d unanswered (first error: %s)",
				l.Rate, ms(l.P99us), l.Errors, l.Refused, l.Unanswered, l.FirstError))
		}
		if checkDied("sweep") {
			return res
		}
	}
	knee := cfg.knee
	if sweeping {
		knee = res.Knee
	}
	if cfg.overload > 0 {
		if knee > 0 && ctx.Err() == nil {
			if sweeping || !cfg.skipLoad {
				pause(ctx, sweepPause)
			}
			logf("overload: %.0f PUB/s (%g × the knee, %.0f) for %v, then %.0f PUB/s for %v",
				cfg.overload*knee, cfg.overload, knee, cfg.overloadDuration, min(knee/2, probeMaxRate), probeDuration)
			runOverload(ctx, c, parts, cfg, knee, &res)
			o := res.Overload
			logf("overload: %.0f acked/s (%.2f of the knee), %d refused, %d errors, %d unanswered; recovered after %d s",
				o.Load.AckedPerSec, o.AckedOfKnee, o.Load.Refused, o.Load.Errors, o.Load.Unanswered, o.RecoveredS)
			if checkDied("overload") {
				return res
			}
		}
	}
	if !cfg.skipFailover && c.system == sysNATS {
		res.notMeasured("the survivors' liveness counters over the failover (Partita's /metrics)")
	}
	if !cfg.skipFailover {
		// The load's backlog of commits and fsyncs should not be
		// counted as failover time.
		time.Sleep(3 * time.Second)
		rate := cfg.failoverLoad
		if cfg.failoverAtKnee {
			rate = knee
		}
		if rate > 0 {
			logf("failover load: %.0f PUB/s over %d partitions; %v later, kill -9 of the node leading most partitions (of nodes 2 and 3)", rate, len(parts), cfg.failoverLead)
		} else {
			if cfg.failoverAtKnee {
				logf("no knee: the failover runs without load")
			}
			logf("kill -9 of the node leading most partitions (of nodes 2 and 3)")
		}
		failover(ctx, c, parts, cfg, rate, &res)
		f := res.Failover
		logf("failover: node %d led %d; %d take a PUB through every surviving node again, the last %.2f s after the kill", f.Node, f.Leaders, f.Recovered, f.AllS)
		if f.Recovered < f.Leaders || f.Leaders == 0 {
			res.fail(fmt.Sprintf("failover: %d of %d partitions took a PUB through every surviving node within %v (first error: %s)", f.Recovered, f.Leaders, cfg.failoverTimeout, f.FirstError))
		}
		if fl := f.Load; fl != nil {
			l := fl.Load
			logf("failover load: %.0f acked/s, p50 %s, p99 %s; %d failover refusals, %d refused, %d errors, %d unanswered",
				l.AckedPerSec, ms(l.P50us), ms(l.P99us), fl.FailoverRefused, l.Refused, l.Errors, l.Unanswered)
			if l.Errors > 0 || l.Unanswered > 0 || l.Acked == 0 {
				res.fail(fmt.Sprintf("failover load: %d errors, %d unanswered, %d acked (first error: %s)", l.Errors, l.Unanswered, l.Acked, l.FirstError))
			}
		}
		for _, n := range f.Survivors {
			if n.RegistrationsLost > 0 {
				res.fail(fmt.Sprintf("failover: surviving node %d lost its registration %d times", n.Node, n.RegistrationsLost))
			}
			if n.Scrapes < 2 {
				res.fail(fmt.Sprintf("failover: surviving node %d's /metrics read %d times (first error: %s): its counters are unknown", n.Node, n.Scrapes, n.FirstScrapeError))
			}
		}
		checkDied("failover")
	}
	return res
}
