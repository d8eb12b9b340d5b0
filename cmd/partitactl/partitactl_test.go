package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// ctl is the built command, run against a cluster's nodes.
type ctl struct {
	t    *testing.T
	bin  string
	node string   // PARTITACTL_NODE
	env  []string // more of the environment
}

// result is one run of the command.
type result struct {
	code        int
	out, errOut string
}

func (c ctl) run(args ...string) result {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(append(os.Environ(), "PARTITACTL_NODE="+c.node), c.env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		c.t.Fatal(err)
	}
	r := result{out: out.String(), errOut: errOut.String()}
	if exit != nil {
		r.code = exit.ExitCode()
	}
	c.t.Logf("partitactl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.out, r.errOut)
	return r
}

// ok runs the command and fails the test unless it exits 0.
func (c ctl) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("partitactl %s exited %d: %s", strings.Join(args, " "), r.code, r.errOut)
	}
	return r.out
}

// row is one line of a printed table, split on its blanks.
type row []string

// rows are the table lines of out that start with a value of the first
// column, header and progress lines left out.
func rows(out, firstHeader string) map[string]row {
	found := map[string]row{}
	inTable := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == firstHeader:
			inTable = true
		case len(f) == 0:
			inTable = false
		case inTable:
			found[f[0]] = f
		}
	}
	return found
}

// partitionRow is a topic table's row: partition, leader, preferred,
// epoch, ISR, catching up, move.
type partitionRow struct {
	leader, preferred string
	isr, catchup      []string
	move              string
}

func partitions(t *testing.T, out string) map[string]partitionRow {
	t.Helper()
	found := map[string]partitionRow{}
	for p, r := range rows(out, "PARTITION") {
		if len(r) < 7 {
			t.Fatalf("topic row %q has too few columns", r)
		}
		found[p] = partitionRow{leader: r[1], preferred: r[2], isr: nodeList(r[4]), catchup: nodeList(r[5]), move: strings.Join(r[6:], " ")}
	}
	return found
}

func nodeList(s string) []string {
	if s == "-" {
		return nil
	}
	l := strings.Split(s, ",")
	slices.Sort(l)
	return l
}

// buildCtl builds this command into the test's temporary directory.
func buildCtl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "partitactl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building partitactl: %v\n%s", err, out)
	}
	return bin
}

// startCluster starts n node processes, n1 to n<n>, on an etcd of the
// test's own, as an external etcd would be.
func startCluster(t *testing.T, n int, extra ...string) map[string]*testnode.Process {
	t.Helper()
	_, endpoint := testnode.StartEtcd(t)
	nodes := map[string]*testnode.Process{}
	for i := 1; i <= n; i++ {
		id := "n" + strconv.Itoa(i)
		nodes[id] = testnode.StartProcess(t, t.TempDir(), append([]string{"--etcd-endpoints", endpoint, "--node-id", id}, extra...)...)
	}
	return nodes
}

// trickle publishes a message every few milliseconds through each node
// in turn until the test ends: a catching-up replica joins its ISR on a
// write.
func trickle(t *testing.T, nodes map[string]*testnode.Process, topic string) {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.HTTP)
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		c := http.Client{Timeout: 5 * time.Second}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			resp, err := c.Post("http://"+addrs[i%len(addrs)]+"/pub?topic="+topic, "text/plain", strings.NewReader("m"+strconv.Itoa(i)))
			if err == nil {
				resp.Body.Close()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-stopped })
}

// prefill puts mb MiB into a partition, so a replica moved there has
// bytes to catch up at the node's rate limit.
func prefill(t *testing.T, addr, topic string, p, mb int) {
	t.Helper()
	line := strings.Repeat("x", 64<<10)
	body := strings.TrimSuffix(strings.Repeat(line+"\n", 16), "\n")
	for range mb {
		if code, resp := testnode.Post(t, addr, fmt.Sprintf("/mpub?topic=%s&partition=%d", topic, p), body); code != 200 {
			t.Fatalf("prefill: %d %s", code, resp)
		}
	}
}

// progressLine is a plain progress line: its percentage, and the rest.
var progressLine = regexp.MustCompile(`^ *(\d+)%(.*)$`)

// wholeProgress checks an operation's plain progress lines: one
// percentage that never goes back, from start to end, across the phases
// of a move, and an ETA on every line before the end from the first that
// has one.
func wholeProgress(t *testing.T, out, title string) {
	t.Helper()
	last, etaFrom := -1, -1
	for i, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, title+" ")
		if !ok {
			continue
		}
		m := progressLine.FindStringSubmatch(rest)
		if m == nil {
			continue // nothing measurable yet
		}
		pct, _ := strconv.Atoi(m[1])
		if pct < last {
			t.Fatalf("progress went back from %d%% to %d%%:\n%s", last, pct, out)
		}
		last = pct
		hasETA := strings.Contains(m[2], "  eta ")
		if hasETA && etaFrom < 0 {
			etaFrom = i
		}
		if etaFrom >= 0 && !hasETA && pct < 100 {
			t.Fatalf("a line without an ETA once one was shown: %q\n%s", line, out)
		}
	}
	if last != 100 {
		t.Fatalf("progress ended at %d%%:\n%s", last, out)
	}
}

// partway is a plain progress line of a replica caught up part of the way.
var partway = regexp.MustCompile(`(?m)^orders/0 n\d->n\d +[1-9]\d%  [1-9][0-9.]* MiB/[0-9.]+ MiB .*adding$`)

// The command's main path against four node processes: it creates a
// topic, lists it and the nodes, moves a follower replica to the fourth
// node while printing progress lines (stdout is not a terminal), moves a
// leader, lowers the replica count, drains a node until removable, and
// exits 1 with the node's reason when a move is refused. Its first
// --node does not answer, so every run also falls over to the next.
func TestPartitactlAgainstACluster(t *testing.T) {
	bin := buildCtl(t)
	// A leader sends a catching-up replica up to 4 MiB at once, then
	// waits out the rate limit: 6 MiB at 1 MB/s keep a moved replica
	// part of the way for about 3 s, long enough to be measured however
	// slow the polls.
	nodes := startCluster(t, 4, "--catchup-rate-limit", "1000000", "--max-replica-moves", "4")
	down := fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t))
	c := ctl{t: t, bin: bin, node: down + "," + nodes["n1"].HTTP}

	out := c.ok("create", "orders", "--partitions", "2", "--replicas", "3")
	if got := partitions(t, out); len(got) != 2 {
		t.Fatalf("create printed %d partitions, want 2", len(got))
	}
	trickle(t, nodes, "orders")
	prefill(t, nodes["n2"].HTTP, "orders", 0, 6)

	parts := partitions(t, c.ok("topic", "orders"))
	p0 := parts["0"]
	if len(parts) != 2 || len(p0.isr) != 3 || p0.preferred != p0.leader || p0.catchup != nil || p0.move != "-" {
		t.Fatalf("topic orders: %+v, want 2 partitions, partition 0 with an ISR of 3 led by its preferred replica", parts)
	}
	held := rows(c.ok("nodes"), "ID")
	total := 0
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		r, ok := held[id]
		if !ok || len(r) != 8 || r[2] != "-" || r[5] != "no" || r[6] != "no" || r[7] != "no" {
			t.Fatalf("nodes row of %s: %q, want id, address, no zone, counts, not draining, not removable, not leaving", id, r)
		}
		n, _ := strconv.Atoi(r[3])
		total += n
	}
	if total != 6 {
		t.Fatalf("nodes hold %d replicas, want 6", total)
	}

	// A follower of partition 0 moves to the node that does not hold it.
	var from, to string
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		switch {
		case !slices.Contains(p0.isr, id):
			to = id
		case id != p0.leader && from == "":
			from = id
		}
	}
	out = c.ok("move", "orders", "0", "--from", from, "--to", to, "--interval", "100ms", "--timeout", "40s")
	title := fmt.Sprintf("orders/0 %s->%s", from, to)
	if !partway.MatchString(out) || !strings.Contains(out, title+" 100%") {
		t.Fatalf("move printed no progress line of the catch-up part of the way in bytes, or none of its end:\n%s", out)
	}
	wholeProgress(t, out, title)
	moved := partitions(t, out)["0"]
	wantISR := slices.Sorted(slices.Values(append(slices.DeleteFunc(slices.Clone(p0.isr), func(n string) bool { return n == from }), to)))
	if !slices.Equal(moved.isr, wantISR) || moved.catchup != nil || moved.move != "-" {
		t.Fatalf("after the move partition 0 is %+v, want ISR %v and no move", moved, wantISR)
	}

	// The leadership moves to the moved-in replica.
	out = c.ok("move-leader", "orders", "0", "--to", to)
	if r := rows(out, "TOPIC")["orders"]; len(r) != 4 || r[1] != "0" || r[2] != to {
		t.Fatalf("move-leader printed %q, want orders 0 led by %s", r, to)
	}
	if got := partitions(t, c.ok("topic", "orders"))["0"]; got.leader != to {
		t.Fatalf("partition 0 led by %s after the leader move, want %s", got.leader, to)
	}

	// Two replicas a partition, then n1 drained.
	out = c.ok("replicas", "orders", "2", "--interval", "100ms", "--timeout", "40s")
	for p, r := range partitions(t, out) {
		if len(r.isr) != 2 || r.move != "-" {
			t.Fatalf("partition %s after replicas 2: %+v", p, r)
		}
	}
	c.node = nodes["n2"].HTTP + "," + down
	out = c.ok("drain", "n1", "--interval", "100ms", "--timeout", "40s")
	if !strings.Contains(out, "drain n1 ") {
		t.Fatalf("drain printed no progress lines:\n%s", out)
	}
	wholeProgress(t, out, "drain n1")
	if r := rows(out, "ID")["n1"]; len(r) != 8 || r[3] != "0" || r[4] != "0" || r[5] != "yes" || r[6] != "yes" {
		t.Fatalf("n1 after the drain: %q, want no replicas, no leaderships, draining, removable", r)
	}

	// A move to a node that is not in the cluster is refused.
	leader := partitions(t, c.ok("topic", "orders"))["0"].leader
	r := c.run("move", "orders", "0", "--from", leader, "--to", "n9")
	if r.code != exitFailed || !strings.Contains(r.errOut, "400") || !strings.Contains(r.errOut, `node "n9" is not live`) {
		t.Fatalf("move to n9: exit %d, stderr %q; want 1 with the node's 400 and its reason", r.code, r.errOut)
	}

	// A wait --timeout ends exits 3; the drain it asked for goes on.
	r = c.run("drain", "n3", "--timeout", "1ms")
	if r.code != exitTimedOut || !strings.Contains(r.errOut, "timed out") {
		t.Fatalf("drain with --timeout 1ms: exit %d, stderr %q; want 3, timed out", r.code, r.errOut)
	}
	if n3 := rows(c.ok("nodes"), "ID")["n3"]; len(n3) != 8 || n3[5] != "yes" {
		t.Fatalf("n3 after an asked drain: %q, want draining", n3)
	}
}

// Against nodes with --http-admin-token, partitactl's changes are refused
// without the token and done with it, from $PARTITACTL_TOKEN or --token;
// upgrade begin and done among them.
func TestPartitactlSendsTheAdminToken(t *testing.T) {
	bin := buildCtl(t)
	nodes := startCluster(t, 1, "--http-admin-token", "s3cret")
	c := ctl{t: t, bin: bin, node: nodes["n1"].HTTP}
	if r := c.run("create", "guarded", "--partitions", "1", "--replicas", "1"); r.code != exitFailed || !strings.Contains(r.errOut, "401") {
		t.Fatalf("create without the token: exit %d %s, want 1 and the node's 401", r.code, r.errOut)
	}
	c.ok("create", "guarded", "--partitions", "1", "--replicas", "1", "--token", "s3cret")
	c.env = []string{"PARTITACTL_TOKEN=s3cret"}
	c.ok("create", "guarded2", "--partitions", "1", "--replicas", "1")
	if out := c.ok("topic", "guarded2"); len(partitions(t, out)) != 1 {
		t.Fatalf("topic guarded2 after its create:\n%s", out)
	}

	// The upgrade mode, shown by cluster.
	c.env = nil
	if r := c.run("upgrade", "begin"); r.code != exitFailed || !strings.Contains(r.errOut, "401") {
		t.Fatalf("upgrade begin without the token: exit %d %s, want 1 and the node's 401", r.code, r.errOut)
	}
	if r := c.run("upgrade", "start"); r.code != exitUsage {
		t.Fatalf("upgrade start: exit %d, want %d", r.code, exitUsage)
	}
	c.env = []string{"PARTITACTL_TOKEN=s3cret"}
	if row := rows(c.ok("upgrade", "begin"), "STABLE")["no"]; len(row) != 10 || row[1] != "n1" {
		t.Fatalf("upgrade begin printed %q, want unstable, controller n1", row)
	} else if _, err := time.Parse(time.RFC3339, row[2]); err != nil {
		t.Fatalf("upgrade begin printed %q, want the time the upgrade began: %v", row, err)
	}
	testnode.Eventually(t, 10*time.Second, "a stable cluster once the upgrade is done", func() bool {
		c.ok("upgrade", "done")
		row := rows(c.ok("cluster"), "STABLE")["yes"]
		return len(row) == 10 && row[2] == "no" && row[3] == "1" && row[5] == "2"
	})
}

// A drain that could never finish is refused before it starts, with the
// partitions that block it: on three nodes, a topic of three replicas has
// nowhere to move the drained node's replicas.
func TestPartitactlRefusesADrainThatCannotFinish(t *testing.T) {
	bin := buildCtl(t)
	nodes := startCluster(t, 3)
	c := ctl{t: t, bin: bin, node: nodes["n1"].HTTP}
	c.ok("create", "full", "--partitions", "2", "--replicas", "3")
	r := c.run("drain", "n3")
	if r.code != exitFailed || !strings.Contains(r.errOut, "400") || !strings.Contains(r.errOut, "full/0") ||
		!strings.Contains(r.errOut, "a replica on every other live node") {
		t.Fatalf("drain n3: exit %d %s, want 1 and the refusal naming full/0", r.code, r.errOut)
	}
	resp, err := http.Get("http://" + nodes["n1"].HTTP + "/nodes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Producers []struct {
			Draining bool `json:"draining"`
		} `json:"producers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || len(doc.Producers) != 3 {
		t.Fatalf("/nodes: %v %+v", err, doc)
	}
	for _, p := range doc.Producers {
		if p.Draining {
			t.Fatalf("a refused drain left a node draining: %+v", doc)
		}
	}
}
