package cluster

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/flood"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

var (
	faultsSeed     = flag.Uint64("faults.seed", 0, "fault suite: the nemesis's seed (0: PARTITA_FAULTS_SEED or the clock)")
	faultsDuration = flag.Duration("faults.duration", 0, "fault suite: how long the nemesis runs (0: PARTITA_FAULTS_DURATION or 2m)")
)

// faultSettings reads the seed and duration from the flags, else the
// environment, else defaults short enough for CI.
func faultSettings(t *testing.T) (uint64, time.Duration) {
	seed, dur := *faultsSeed, *faultsDuration
	if s := os.Getenv("PARTITA_FAULTS_SEED"); seed == 0 && s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("PARTITA_FAULTS_SEED: %v", err)
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if d := os.Getenv("PARTITA_FAULTS_DURATION"); dur == 0 && d != "" {
		var err error
		if dur, err = time.ParseDuration(d); err != nil {
			t.Fatalf("PARTITA_FAULTS_DURATION: %v", err)
		}
	}
	if dur == 0 {
		dur = 2 * time.Minute
	}
	return seed, dur
}

// faultLab is the fault suite's cluster: three node processes, each in its
// own network namespace, on Debian's etcd on the bridge.
type faultLab struct {
	*testCluster
	lab   *netLab
	ids   []string
	args  map[string][]string
	netem bool
	// past holds the logs of each node's earlier, killed instances.
	past map[string][]*testnode.Process
	// flooding, while the overload fault lasts, is closed to stop it;
	// flooded is done when its clients have read their last answers.
	flooding chan struct{}
	flooded  sync.WaitGroup
	// floods checks the floods' acknowledged publishes; floodRound
	// keeps each flood's bodies apart from the last one's.
	floods     *floodCheck
	floodRound int
	// movedAway is the flood partitions leadersAwayInOverload or
	// killWhileLeadersMoveToIt moved away from awayFrom.
	movedAway []int32
	awayFrom  string
	// movingAway is killWhileLeadersMoveToIt's moves still asked.
	movingAway sync.WaitGroup
}

func startFaultLab(t *testing.T) *faultLab {
	ids := []string{"n1", "n2", "n3"}
	lab := newNetLab(t, ids...)
	etcd := startSystemEtcdOn(t, lab.etcdHost(), 2379)
	c := &testCluster{t: t, etcdAddr: etcd.Endpoint, cli: etcd.Client, assign: cluster.NewAssignments(etcd.Client, "/partita/"), nodes: map[string]*testnode.Process{}}
	f := &faultLab{testCluster: c, lab: lab, ids: ids, args: map[string][]string{}, past: map[string][]*testnode.Process{}}
	for _, id := range ids {
		ip, dir := lab.addr(id), t.TempDir()
		f.args[id] = []string{"--data-path", dir,
			"--tcp-address", ip + ":4150", "--http-address", ip + ":4151", "--cluster-address", ip + ":4152",
			"--node-id", id, "--etcd-endpoints", etcd.Endpoint, "--log-level", "info"}
		// PARTITA_FAULTS_NODE_ARGS runs the suite on other settings of
		// the node, such as --journal=false (docs/faults.md).
		f.args[id] = append(f.args[id], strings.Fields(os.Getenv("PARTITA_FAULTS_NODE_ARGS"))...)
		f.start(id)
	}
	// netem needs the sch_netem kernel module, which a container may lack.
	f.netem = exec.Command("tc", "-n", lab.ns(ids[0]), "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms").Run() == nil
	if f.netem {
		run(t, "tc", "-n", lab.ns(ids[0]), "qdisc", "del", "dev", "lo", "root")
	}
	return f
}

func (f *faultLab) start(id string) {
	if old := f.nodes[id]; old != nil {
		f.past[id] = append(f.past[id], old)
	}
	f.nodes[id] = testnode.StartProcessIn(f.t, f.lab.ns(id), f.args[id][1], f.args[id]...)
}

func (f *faultLab) tcp(id string) string { return f.lab.addr(id) + ":4150" }

// memberTCP is tcp for one of the lab's nodes and "" for any other name;
// unlike f.nodes it is safe beside restarts.
func (f *faultLab) memberTCP(id string) string {
	if slices.Contains(f.ids, id) {
		return f.tcp(id)
	}
	return ""
}

// resetSessions aborts every TCP connection to or from the node's cluster
// port at once.
func (f *faultLab) resetSessions(id string) {
	run(f.t, "ip", "netns", "exec", f.lab.ns(id), "ss", "-K", "state", "established", "( sport = :4152 or dport = :4152 )")
}

// veth is the node's end of its link to the bridge.
func (f *faultLab) veth(id string) string {
	return fmt.Sprintf("ptp%s%d", f.lab.id, slices.Index(f.ids, id))
}

// fault is one kind of harm the nemesis does to a node, and its undoing.
type fault struct {
	name         string
	inject, heal func(node string)
}

func (f *faultLab) faults() []fault {
	signal := func(sig syscall.Signal) func(string) {
		return func(id string) { f.nodes[id].Cmd.Process.Signal(sig) }
	}
	qdisc := func(spec ...string) func(string) {
		return func(id string) {
			run(f.t, append([]string{"tc", "-n", f.lab.ns(id), "qdisc", "add", "dev", f.veth(id), "root"}, spec...)...)
		}
	}
	unqdisc := func(id string) { run(f.t, "tc", "-n", f.lab.ns(id), "qdisc", "del", "dev", f.veth(id), "root") }
	out := []fault{
		{"kill -9", func(id string) { f.nodes[id].Kill(f.t) }, f.start},
		// A node killed and started again at once: its leaders' early
		// attempt to reach it (100–200 ms after the loss) finds it still
		// starting, so they come back only after --replica-redial-max;
		// its partitions must catch up and rejoin all the same.
		{"restart", func(id string) { f.nodes[id].Kill(f.t); f.start(id) }, func(string) {}},
		{"partition", f.lab.cut, f.lab.heal},
		{"pause", signal(syscall.SIGSTOP), signal(syscall.SIGCONT)},
		// A slow link: everything the node sends queues behind a token
		// bucket (up to 200 ms) and what does not fit is dropped.
		{"throttle", qdisc("tbf", "rate", "256kbit", "burst", "16kbit", "latency", "200ms"), unqdisc},
		// Every replication session to or from the node aborted at once,
		// as a middlebox dropping its connection state would: each
		// session carries all the partitions two nodes share, so every
		// one of them hears its follower down together, and the sessions
		// redial by themselves.
		{"session reset", f.resetSessions, func(string) {}},
		// A planned hand-over: the leadership of every partition the node
		// follows in sync is asked onto it.
		{"move leader", f.moveLeadersTo, func(string) {}},
		// A leadership lost and regained at once: every partition the
		// node leads moves to a follower and straight back, so the node
		// leads again while its first leadership's replica actors may
		// still be stopping and forwards sent to it may still arrive.
		{"leader away and back", f.moveLeadersAwayAndBack, func(string) {}},
		// A lease lapsed under a live node, as etcd ends one whose
		// renewals came too late: the node registers again while its
		// peers' sessions to it answer, and its partitions keep it as
		// their leader for --node-lapse-grace.
		{"lease lapse", f.endLease, func(string) {}},
	}
	if f.netem {
		out = append(out, fault{"delay", qdisc("netem", "delay", "100ms", "50ms"), unqdisc})
	}
	// More publishes than the cluster can write: two clients flood the
	// node with pipelined PUBs over the 30 partitions of a topic of their
	// own, leaders elsewhere included (forwarded), until healed. The
	// workload's publishes may be refused meanwhile; nothing may break.
	out = append(out, fault{"overload", f.flood, f.unflood})
	// A node killed while a peer is flooded past what it admits: its
	// partitions fail over on survivors that are refusing publishes.
	out = append(out, fault{"kill -9 in an overload", f.killInOverload, f.unfloodAndStart})
	// A node stopped with SIGTERM while a peer is flooded: it hands its
	// leaderships off first, to nodes refusing publishes, and the peer's
	// forwards to it go on to the new leaders.
	out = append(out, fault{"stop in an overload", f.stopInOverload, f.unfloodAndStart})
	// Leaderships moved away under forwarded batches: a peer is flooded,
	// so that the publishes for the partitions the node leads queue for
	// its connections and go to it in batches, and then each of those
	// leaderships moves to another replica. A batch in flight is answered
	// by the leader it went to, or fails; a publish still queued goes to
	// the new leader.
	out = append(out, fault{"leader away in an overload", f.leadersAwayInOverload, f.unfloodAndLeadersBack})
	// A node killed while leaderships move to it: a peer is flooded,
	// and the leaderships of the flood's partitions another node leads
	// are asked onto the node a moment before it dies. Rounds of moves
	// waiting for the old leader to drain give way to the loss, whose
	// elections come first; moves stored just before it fail over again.
	out = append(out, fault{"kill -9 while leaders move to it", f.killWhileLeadersMoveToIt, f.leadersBackAndStart})
	// Replicas moved out and back under the clients: every partition loses
	// a follower's replica (its files deleted) and gains one again, caught
	// up from the leader and joined to the ISR; those of the never-written
	// topic idle join on the probe of an empty log.
	out = append(out, fault{"move replica", f.replicaCount(2), f.replicaCount(3)})
	// With the node's journal: a power loss of one node. Killed, it loses
	// from its partition files and channel states everything its journal
	// holds that the disk may not have had (the journal stays whole, as a power loss
	// may leave it), and must restore it from the journal as it starts.
	if journalOn(strings.Fields(os.Getenv("PARTITA_FAULTS_NODE_ARGS"))) {
		out = append(out, fault{"power loss", f.powerLoss, f.start})
	}
	return out
}

// onlyFaults keeps the faults named in only (comma-separated), to run a
// few of them at length; every fault when only is empty.
func onlyFaults(t *testing.T, faults []fault, only string) []fault {
	if only == "" {
		return faults
	}
	var kept []fault
	for name := range strings.SplitSeq(only, ",") {
		i := slices.IndexFunc(faults, func(ft fault) bool { return ft.name == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("PARTITA_FAULTS_ONLY: no fault %q", name)
		}
		kept = append(kept, faults[i])
	}
	return kept
}

// journalOn reports whether nodes started with args keep the node's
// journal: on by default, off with --journal=false. Without it the suite
// cannot tell what a power loss may take, so it injects none.
func journalOn(args []string) bool {
	on := true
	for _, a := range args {
		name, value, set := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "journal" {
			b, _ := strconv.ParseBool(value)
			on = !set || b
		}
	}
	return on
}

// powerLoss kills node id and cuts each partition file and channel state
// its journal recorded back to all a power loss may leave of it
// (storage.JournalFloors).
func (f *faultLab) powerLoss(id string) {
	f.nodes[id].Kill(f.t)
	floors, err := storage.JournalFloors(f.args[id][1])
	if err != nil {
		f.t.Errorf("reading %s's journal: %v", id, err)
		return
	}
	var files, states int
	for path, floor := range floors {
		if st, err := os.Stat(path); err == nil && st.Size() > floor {
			if err := os.Truncate(path, floor); err != nil {
				f.t.Errorf("cutting %s: %v", path, err)
			}
			if filepath.Base(filepath.Dir(path)) == "channels" {
				states++
			} else {
				files++
			}
		}
	}
	f.t.Logf("power loss of %s: %d partition files and %d channel-state files cut back to their last checkpoint", id, files, states)
}

// endLease ends node id's registration lease in etcd, and its controller
// campaign's, while the node runs.
func (f *faultLab) endLease(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cluster.EvictIfGone(ctx, f.cli, "/partita/", id, func(cluster.NodeInfo) bool { return true }); err != nil {
		f.t.Logf("ending %s's lease: %v", id, err)
	}
}

// floodPartitions is how many partitions the overload faults' topic has:
// a third of them led by each node, so that a flood through one node is
// mostly forwarded.
const floodPartitions = 30

// startFloodCheck creates the overload faults' topic and consumes it
// from the start: every publish a flood had acknowledged must come, as
// the workload's must (floodCheck.finish).
func (f *faultLab) startFloodCheck() *floodCheck {
	if code, body := testnode.Post(f.t, f.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=flood&partition_num=%d&replicator=3", floodPartitions), ""); code != 200 {
		f.t.Fatalf("create flood: %d %s", code, body)
	}
	testnode.Post(f.t, f.nodes["n1"].HTTP, "/channel/create?topic=flood&channel=check", "")
	fc := &floodCheck{acked: map[string]bool{}, d: &delivery{got: map[string]bool{}, start: time.Now()}}
	fc.d.last = fc.d.start
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 3000
	cfg.LookupdPollInterval = time.Second
	cons, err := nsq.NewConsumer("flood", "check", cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	// Each failover and leader move makes the FINs of the messages in
	// flight fail (E_FIN_FAILED), which go-nsq logs one by one; the
	// check reads the deliveries instead.
	cons.SetLogger(quietLogger, nsq.LogLevelError)
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error { fc.d.received(m); return nil }))
	if err := cons.ConnectToNSQLookupds(f.lookups()); err != nil {
		f.t.Fatal(err)
	}
	fc.d.cons = []*nsq.Consumer{cons}
	f.floods = fc
	return fc
}

// floodCheck holds what the overload faults' floods had acknowledged, and
// a consumer of their topic.
type floodCheck struct {
	mu    sync.Mutex
	acked map[string]bool
	d     *delivery
}

func (fc *floodCheck) add(bodies []string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	for _, b := range bodies {
		fc.acked[b] = true
	}
}

// finish fails t unless every acknowledged flood publish was delivered.
func (fc *floodCheck) finish(t *testing.T) {
	t.Helper()
	defer fc.d.stop()
	fc.mu.Lock()
	acked := maps.Clone(fc.acked)
	fc.mu.Unlock()
	fc.d.await(t, acked, 60*time.Second)
	t.Logf("the floods' %d acknowledged publishes all delivered", len(acked))
}

// flood starts the overload fault's clients against node id.
func (f *faultLab) flood(id string) {
	var ps []flood.Target
	for p := range int32(floodPartitions) {
		ps = append(ps, flood.Target{Topic: "flood", Partition: p})
	}
	stop := make(chan struct{})
	f.flooding = stop
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	addr := f.tcp(id)
	f.floodRound++
	round := f.floodRound
	for c := range 2 {
		f.flooded.Add(1)
		go func() {
			defer f.flooded.Done()
			r := flood.Publish(addr, ps, fmt.Sprintf("flood%d-%s-%d", round, id, c), overloadWindow, stopped)
			f.floods.add(r.Acked)
			f.t.Logf("overload of %s, client %d: %d acknowledged, %d refused, %d failed otherwise (%s), %d unanswered",
				id, c, len(r.Acked), r.Refused, r.Failed, r.FirstFailure, r.Unanswered)
		}()
	}
}

// unflood stops the overload and waits for its clients' last answers.
func (f *faultLab) unflood(string) {
	close(f.flooding)
	f.flooded.Wait()
}

// killInOverload floods the node after id, as the overload fault does,
// and kills id a second later: the flood's clients keep more publishes
// unanswered than the cluster writes in that time.
func (f *faultLab) killInOverload(id string) {
	peer := f.ids[(slices.Index(f.ids, id)+1)%len(f.ids)]
	f.flood(peer)
	<-time.After(time.Second)
	f.nodes[id].Kill(f.t)
}

// stopInOverload is killInOverload with SIGTERM: a graceful stop.
func (f *faultLab) stopInOverload(id string) {
	peer := f.ids[(slices.Index(f.ids, id)+1)%len(f.ids)]
	f.flood(peer)
	<-time.After(time.Second)
	f.t.Logf("stop in an overload: %s stopped in %v", id, f.nodes[id].Terminate(f.t, 30*time.Second).Round(time.Millisecond))
}

// leadersAwayInOverload moves the leaderships of flood's partitions that
// id leads to followers in sync, through id, a second into a flood of the
// node after it: that node forwards to the leadership that ends, and
// then to the new one, the third node where it can be. When id leads
// none of them (after a failover they gather on the survivors until the
// leader balance gives them back), the node leading the most stands in
// for it.
func (f *faultLab) leadersAwayInOverload(id string) {
	states := f.floodPartitions("leader away in an overload")
	leaders := map[string]int{}
	for _, st := range states {
		leaders[st.Leader]++
	}
	from := id
	if leaders[id] == 0 {
		for _, n := range f.ids {
			if leaders[n] > leaders[from] {
				from = n
			}
		}
	}
	f.awayFrom, f.movedAway = from, nil
	peer := f.ids[(slices.Index(f.ids, from)+1)%len(f.ids)]
	f.flood(peer)
	<-time.After(time.Second)
	var led int
	for _, st := range states {
		followers := f.followers(st)
		if st.Leader != from || len(followers) == 0 {
			continue
		}
		led++
		to := followers[0]
		if i := slices.IndexFunc(followers, func(n string) bool { return n != peer }); i >= 0 {
			to = followers[i]
		}
		a, err := f.moveLeader(from, "flood", int(st.Partition), to)
		if err == nil && a.status == 200 {
			f.movedAway = append(f.movedAway, st.Partition)
		} else {
			f.t.Logf("move leader of flood/%d from %s to %s: %d %s %v", st.Partition, from, to, a.status, a.body, err)
		}
	}
	f.t.Logf("leader away in an overload: %d of the %d flood partitions %s led with a follower in sync moved away, %s flooded (leaders before: %v)", len(f.movedAway), led, from, peer, leaders)
}

// floodPartitions reads the states of flood's partitions for the fault
// named; none, logged, when etcd does not answer.
func (f *faultLab) floodPartitions(fault string) []cluster.PartitionState {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	states, err := f.assign.List(ctx, "flood")
	if err != nil {
		f.t.Logf("%s: reading flood's partitions: %v", fault, err)
	}
	return states
}

// killWhileLeadersMoveToIt floods the node two after id, asks the
// leaderships of the flood's partitions that the node after id leads onto
// id, each in a request of its own through that leader, and kills id as
// the first of them is answered (at most 2 s after they were asked).
func (f *faultLab) killWhileLeadersMoveToIt(id string) {
	from := f.ids[(slices.Index(f.ids, id)+1)%len(f.ids)]
	peer := f.ids[(slices.Index(f.ids, id)+2)%len(f.ids)]
	states := f.floodPartitions("kill -9 while leaders move to it")
	f.awayFrom, f.movedAway = from, nil
	f.flood(peer)
	<-time.After(time.Second)
	var mu sync.Mutex
	asked := 0
	answered := make(chan struct{})
	var first sync.Once
	for _, st := range states {
		if st.Leader != from || !slices.Contains(f.followers(st), id) {
			continue
		}
		asked++
		f.movingAway.Go(func() {
			a, err := f.moveLeader(from, "flood", int(st.Partition), id)
			first.Do(func() { close(answered) })
			if err != nil || a.status != 200 {
				f.t.Logf("move leader of flood/%d from %s to %s: %d %s %v", st.Partition, from, id, a.status, a.body, err)
				return
			}
			mu.Lock()
			f.movedAway = append(f.movedAway, st.Partition)
			mu.Unlock()
		})
	}
	// The first answer ends the controller's first round of these moves:
	// the rounds of the others are under way, their old leader
	// draining under the flood.
	asking := time.Now()
	if asked == 0 {
		first.Do(func() { close(answered) })
	}
	select {
	case <-answered:
	case <-time.After(2 * time.Second):
	}
	f.nodes[id].Kill(f.t)
	f.t.Logf("kill -9 while leaders move to it: %s killed %v after %d moves of flood partitions from %s were asked, at the first answer; %s flooded",
		id, time.Since(asking).Round(time.Millisecond), asked, from, peer)
}

// leadersBackAndStart heals killWhileLeadersMoveToIt: once every move
// asked is answered, the flood stops, the node restarts, and the
// leaderships that moved are asked back.
func (f *faultLab) leadersBackAndStart(id string) {
	f.movingAway.Wait()
	f.unflood(id)
	f.start(id)
	for _, p := range f.movedAway {
		if a, err := f.moveLeader(f.awayFrom, "flood", int(p), f.awayFrom); err != nil || a.status != 200 {
			f.t.Logf("move leader of flood/%d back to %s: %d %s %v", p, f.awayFrom, a.status, a.body, err)
		}
	}
}

// unfloodAndLeadersBack heals leadersAwayInOverload: the flood stops, and
// the leaderships that moved away are asked back, so that the next flood
// forwards to every node again.
func (f *faultLab) unfloodAndLeadersBack(string) {
	f.unflood("")
	for _, p := range f.movedAway {
		if a, err := f.moveLeader(f.awayFrom, "flood", int(p), f.awayFrom); err != nil || a.status != 200 {
			f.t.Logf("move leader of flood/%d back to %s: %d %s %v", p, f.awayFrom, a.status, a.body, err)
		}
	}
}

// unfloodAndStart heals killInOverload: the flood stops, and the node
// restarts on its data directory.
func (f *faultLab) unfloodAndStart(id string) {
	f.unflood(id)
	f.start(id)
}

// replicaCount asks, through the node given, for every topic of the
// workload to move to n replicas; a change asked while the last one is
// still moving is asked again until taken.
func (f *faultLab) replicaCount(n int) func(string) {
	return func(id string) {
		for _, topic := range []string{"load", "ord", "idle"} {
			q := fmt.Sprintf("/topic/meta/update?topic=%s&replicator=%d", topic, n)
			for deadline := time.Now().Add(30 * time.Second); ; <-time.After(100 * time.Millisecond) {
				code, body := testnode.Post(f.t, f.nodes[id].HTTP, q, "")
				if code == 200 || time.Now().After(deadline) {
					if code != 200 {
						f.t.Logf("%s: %d %s", q, code, body)
					}
					break
				}
			}
		}
	}
}

// healthy is whether every partition of topics has its three replicas in
// sync.
func (f *faultLab) healthy(topics map[string]int) bool {
	for topic, parts := range topics {
		for p := 0; p < parts; p++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, ok, err := f.assign.Get(ctx, topic, int32(p))
			cancel()
			if err != nil || !ok || len(st.ISR) < 3 {
				return false
			}
		}
	}
	return true
}

// describe is the partitions' replication states, for the log.
func (f *faultLab) describe(topics map[string]int) string {
	var out []string
	for topic, parts := range topics {
		for p := 0; p < parts; p++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			st, _, err := f.assign.Get(ctx, topic, int32(p))
			cancel()
			out = append(out, fmt.Sprintf("%s/%d leader %s ISR %v catchup %v epoch %d write-disabled %v %v", topic, p, st.Leader, st.ISR, st.Catchup, st.EpochForWrite, st.WriteDisabled, err))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// get is a GET of a node's HTTP API that may fail: a node can be down.
func (f *faultLab) get(id, pathAndQuery string) (int, string) {
	code, body, err := get(f.nodes[id].HTTP, pathAndQuery)
	if code == 0 {
		return 0, err.Error() // no answer: the node is down or cut off
	}
	return code, body
}

// The fault suite: three node processes under go-nsq producers and
// consumers on every node, and an ordered consumer, while a nemesis chosen
// by a seed kills -9 and restarts nodes, cuts a node off from the others
// and etcd, slows or delays its link, pauses it, floods it past what it
// writes (killing or moving leaderships meanwhile) and moves replicas off
// the nodes and back, one fault at a time.
// Then everything heals and the consumers drain. The checker reads the
// history: every acknowledged message delivered, nothing delivered that
// was never published, the ordered channel in order with no gap; and the
// poison stream's: every acknowledged message delivered past the poison
// ones of an ordered channel with max_attempts, every acknowledged poison
// message in the dead-letter topic; and the idempotent producers'
// (faults_idem_test.go): with a dedupe window every acknowledged ID in the
// log once within the window, without one duplicates; and the floods':
// every publish they had acknowledged delivered.
//
// CI runs 2 minutes of faults; an hour (docs/faults.md):
//
//	PARTITA_FAULTS_DURATION=1h go test ./tests/cluster/ -run 'TestFaults$' -v -timeout 2h
//
// PARTITA_FAULTS_ONLY="kill -9,pause" injects only the faults named.
// PARTITA_FAULTS_LOGDIR keeps every node instance's whole log there; a
// failed run keeps them in a new temporary directory.
func TestFaults(t *testing.T) {
	seed, duration := faultSettings(t)
	t.Logf("fault suite: seed %d (PARTITA_FAULTS_SEED=%d repeats it), nemesis for %v", seed, seed, duration)
	rng := rand.New(rand.NewPCG(seed, seed))
	f := startFaultLab(t)
	if !f.netem {
		t.Log("tc netem is not available here (no sch_netem): the delay fault is skipped; throttle (tbf) still slows links")
	}
	w := startWorkloadWithPoison(f)
	topics, h := w.topics, w.h
	idem := startIdemStream(f, "idem", idemWindow, 50*time.Millisecond, topics)
	noIdem := startIdemStream(f, "noidem", 0, 250*time.Millisecond, topics)
	floods := f.startFloodCheck()

	from := time.Now()
	injected := map[string]int{}
	var windows []faultWindow
	var unhealed []string
	faults := onlyFaults(t, append(f.faults(), f.expandFault(topics)), os.Getenv("PARTITA_FAULTS_ONLY"))
	for time.Since(from) < duration {
		ft, node := faults[rng.IntN(len(faults))], f.ids[rng.IntN(len(f.ids))]
		hold := time.Duration(1000+rng.IntN(5000)) * time.Millisecond
		t.Logf("%6.1fs %s %s for %v", time.Since(from).Seconds(), ft.name, node, hold)
		if n := len(windows); n > 0 {
			windows[n-1].to = time.Now()
		}
		windows = append(windows, faultWindow{kind: ft.name, from: time.Now()})
		ft.inject(node)
		// The fault lasts hold: a schedule, not a wait for a condition.
		<-time.After(hold)
		ft.heal(node)
		injected[ft.name]++
		// One fault at a time against a cluster that had time to recover:
		// the promise is to survive any single fault.
		deadline := time.Now().Add(30 * time.Second)
		for !f.healthy(topics) {
			if time.Now().After(deadline) {
				state := f.describe(topics)
				unhealed = append(unhealed, fmt.Sprintf("%s %s at %.1fs: %s", ft.name, node, time.Since(from).Seconds(), state))
				t.Logf("%6.1fs not every replica back in sync 30 s after healing: %s", time.Since(from).Seconds(), state)
				break
			}
			<-time.After(100 * time.Millisecond)
		}
	}
	to := time.Now()
	windows[len(windows)-1].to = to
	v := w.finish(from, to)
	pv := w.poisVerdict
	iv, nv := idem.finish(), noIdem.finish()
	total := 0
	for _, n := range injected {
		total += n
	}
	t.Logf("seed %d, %v of faults: %d injected %v, %d without full recovery within 30 s", seed, to.Sub(from).Round(time.Second), total, injected, len(unhealed))
	t.Logf("%v", v)
	t.Logf("%v", pv)
	t.Logf("idempotent producers: %v; without a window, %v", iv, nv)
	all, ordered := h.unavailabilityByKind(windows)
	for _, kind := range slices.Sorted(maps.Keys(all)) {
		t.Logf("%s, %d faults: longest stretch without an acknowledged publish from the fault to the next, all producers %s; ordered partition %s",
			kind, len(all[kind]), spread(all[kind]), spread(ordered[kind]))
	}
	if dir := os.Getenv("PARTITA_FAULTS_LOGDIR"); dir != "" || len(unhealed) > 0 || !v.strictOK() || len(pv.problems()) > 0 {
		f.keepLogs(dir)
	}
	if !v.strictOK() {
		t.Errorf("seed %d: %s", seed, v.problems())
	}
	for _, p := range pv.problems() {
		t.Errorf("seed %d: %s", seed, p)
	}
	if len(iv.lost) > 0 || iv.duplicates > 0 {
		t.Errorf("seed %d: with a dedupe window, %v (lost %v)", seed, iv, iv.lost[:min(len(iv.lost), 10)])
	}
	if nv.acked > 0 && nv.duplicates == 0 {
		t.Errorf("seed %d: the checker found no duplicate of the producer without a dedupe window: %v", seed, nv)
	}
	// Surviving a fault means the cluster heals from it: a replica left
	// out of its ISR is a lost copy the next fault can turn into lost data.
	for _, u := range unhealed {
		t.Errorf("seed %d: not every replica back in sync 30 s after healing %s", seed, u)
	}
	if v.Acknowledged < 1000 {
		t.Errorf("only %d publishes acknowledged: the clients barely ran", v.Acknowledged)
	}
	// Last: it ends the test at once if a flood's publish is missing.
	floods.finish(t)
}

// workload is the fault suite's clients against a faultLab: on topic load
// (two partitions) a producer through each node and a consumer whose
// lookups start at each node; on the ordered topic ord one producer moving
// to the next node on a failure and one SUB_ORDERED consumer following the
// leader. Everything they do goes into h.
type workload struct {
	t                     *testing.T
	f                     *faultLab
	topics                map[string]int
	h                     *history
	pois                  *poisonStream // nil without startWorkloadWithPoison
	poisVerdict           poisonVerdict // the poison stream's, after finish
	stopPubs, stopClients func()
}

// startWorkload creates the topics, starts the clients and returns once
// 200 publishes were acknowledged.
func startWorkload(f *faultLab) *workload { return startWorkloadWith(f, false) }

// startWorkloadWithPoison is startWorkload with the poison stream too
// (deadletter_test.go).
func startWorkloadWithPoison(f *faultLab) *workload { return startWorkloadWith(f, true) }

func startWorkloadWith(f *faultLab, poison bool) *workload {
	t := f.t
	if code, body := testnode.Post(t, f.nodes["n1"].HTTP, "/topic/create?topic=load&partition_num=2&replicator=3", ""); code != 200 {
		t.Fatalf("create load: %d %s", code, body)
	}
	if code, body := testnode.Post(t, f.nodes["n2"].HTTP, "/topic/create?topic=ord&partition_num=1&replicator=3&ordered=true", ""); code != 200 {
		t.Fatalf("create ord: %d %s", code, body)
	}
	// Never written to: its replicas, restarted, moved out and back, must
	// come back into the ISR with no publish to probe them with.
	if code, body := testnode.Post(t, f.nodes["n3"].HTTP, "/topic/create?topic=idle&partition_num=2&replicator=3", ""); code != 200 {
		t.Fatalf("create idle: %d %s", code, body)
	}
	testnode.Post(t, f.nodes["n3"].HTTP, "/channel/create?topic=load&channel=ch", "")
	testnode.Post(t, f.nodes["n1"].HTTP, "/channel/create?topic=ord&channel=seq", "")
	var pois *poisonStream
	topics := map[string]int{"load": 2, "ord": 1, "idle": 2}
	if poison {
		pois = startPoisonStream(f)
		topics[poisonTopic] = 1
	}

	h := newHistory()
	stopPub, stopSub := make(chan struct{}), make(chan struct{})
	var pubs, subs sync.WaitGroup
	for _, id := range f.ids {
		pubs.Add(1)
		go func() { defer pubs.Done(); publishLoad(f.tcp(id), id, h, stopPub) }()
		subs.Add(1)
		go func() { defer subs.Done(); consumeLoad(t, f, id, h, stopSub) }()
	}
	ord := orderedStream{c: f.testCluster, topic: "ord", channel: "seq", p: 0, h: h}
	pubs.Add(1)
	go func() { defer pubs.Done(); ord.publish(stopPub) }()
	subs.Add(1)
	go func() { defer subs.Done(); ord.consume(stopSub) }()
	if pois != nil {
		pubs.Add(1)
		go func() { defer pubs.Done(); pois.publish(stopPub) }()
		subs.Add(1)
		go func() { defer subs.Done(); pois.consume(t, stopSub) }()
	}
	var pubsOnce, subsOnce sync.Once
	w := &workload{t: t, f: f, topics: topics, h: h, pois: pois}
	w.stopPubs = func() { pubsOnce.Do(func() { close(stopPub); pubs.Wait() }) }
	w.stopClients = func() { w.stopPubs(); subsOnce.Do(func() { close(stopSub); subs.Wait() }) }
	t.Cleanup(w.stopClients)
	acked := func() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.acked) }
	testnode.Eventually(t, 30*time.Second, "publishing before the faults", func() bool { return acked() >= 200 })
	return w
}

// finish stops the producers, drains until every acknowledged message was
// delivered or none was for 30 s (the ordered channel delivers one message
// at a time, so a long run's backlog takes a while), stops the consumers
// and checks the history over [from, to], and the poison stream, if any,
// into poisVerdict.
func (w *workload) finish(from, to time.Time) verdict {
	w.stopPubs()
	drainStart := time.Now()
	missing := func() int {
		if w.pois == nil {
			return w.h.missing()
		}
		return w.h.missing() + w.pois.undelivered()
	}
	last, lastProgress := missing(), time.Now()
	for last > 0 && time.Since(lastProgress) < 30*time.Second {
		<-time.After(200 * time.Millisecond)
		if m := missing(); m < last {
			last, lastProgress = m, time.Now()
		}
	}
	w.t.Logf("drained for %v", time.Since(drainStart).Round(time.Second))
	if last > 0 {
		// Where the undelivered messages wait, for the reader of a failure.
		w.t.Logf("%d not delivered; %s", last, w.f.describe(w.topics))
		for _, id := range w.f.ids {
			code, body := w.f.get(id, "/stats?format=text")
			w.t.Logf("%s /stats: %d\n%s", id, code, body)
		}
	}
	w.stopClients()
	if w.pois != nil {
		w.poisVerdict = w.pois.check()
	}
	return w.h.check(from, to)
}

// keepLogs writes every node instance's whole log into dir (a new
// temporary directory when empty), for reading after the run, and prints
// the end of each node's last one.
func (f *faultLab) keepLogs(dir string) {
	t := f.t
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "partita-faults-logs-"); err != nil {
			t.Logf("keeping the logs: %v", err)
			return
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keeping the logs: %v", err)
		return
	}
	for _, id := range f.ids {
		// The logs are readable once the processes have exited.
		f.nodes[id].Kill(t)
		for i, p := range append(f.past[id], f.nodes[id]) {
			name := filepath.Join(dir, fmt.Sprintf("%s-%03d.log", id, i))
			if err := os.WriteFile(name, p.Log.Bytes(), 0o644); err != nil {
				t.Logf("keeping %s: %v", name, err)
			}
		}
		l := f.nodes[id].Log.String()
		t.Logf("%s's log (end):\n%s", id, l[max(0, len(l)-4000):])
	}
	t.Logf("every node instance's log is in %s", dir)
}

// quietLogger drops go-nsq's logging: under faults it reports every failed
// connection, which the history already records.
var quietLogger = log.New(io.Discard, "", 0)

// wait pauses a client loop after a failure, or returns false once stop is
// closed.
func wait(stop <-chan struct{}, d time.Duration) bool {
	select {
	case <-stop:
		return false
	case <-time.After(d):
		return true
	}
}

func stopping(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// freshProducer is a go-nsq producer that is replaced after any failure:
// go-nsq v1.1.0's Producer races with itself when it reconnects (connect
// writes the connection its old router goroutine still reads).
type freshProducer struct {
	addr string
	p    *nsq.Producer
}

func (f *freshProducer) publish(topic, body string) error {
	if f.p == nil {
		p, err := nsq.NewProducer(f.addr, nsq.NewConfig())
		if err != nil {
			return err
		}
		p.SetLogger(quietLogger, nsq.LogLevelError)
		f.p = p
	}
	err := f.p.Publish(topic, []byte(body))
	if err != nil {
		f.close()
	}
	return err
}

func (f *freshProducer) close() {
	if f.p != nil {
		f.p.Stop()
		f.p = nil
	}
}

// publishLoad publishes numbered bodies to the load topic through one node
// until stop.
func publishLoad(addr, id string, h *history, stop <-chan struct{}) {
	p := &freshProducer{addr: addr}
	defer p.close()
	for i := 0; !stopping(stop); i++ {
		body := fmt.Sprintf("%s-%d", id, i)
		h.attempt(body)
		if err := p.publish("load", body); err != nil {
			if !wait(stop, 50*time.Millisecond) {
				return
			}
			continue
		}
		h.ack(body, time.Now())
	}
}

// consumeLoad consumes the load topic's channel through lookups, the
// node's own first, until stop.
func consumeLoad(t *testing.T, f *faultLab, id string, h *history, stop <-chan struct{}) {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 100
	cfg.LookupdPollInterval = time.Second
	cfg.LookupdPollJitter = 0.1
	c, err := nsq.NewConsumer("load", "ch", cfg)
	if err != nil {
		panic(err)
	}
	c.SetLogger(quietLogger, nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		h.deliver(string(m.Body))
		return nil
	}))
	i := slices.Index(f.ids, id)
	var lookups []string
	for k := range f.ids {
		lookups = append(lookups, f.lab.addr(f.ids[(i+k)%len(f.ids)])+":4151")
	}
	if err := c.ConnectToNSQLookupds(lookups); err != nil {
		t.Errorf("consumer %s: %v", id, err)
		return
	}
	<-stop
	c.Stop()
	<-c.StopChan
}
