package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// dashboardsDir holds the Grafana dashboards and the scrape config.
func dashboardsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "dashboards")
}

// A real Prometheus scrapes a three-node cluster every second through a
// workload with an ISR shrink and rejoin, a replica added to a partition
// holding 5 MiB under a 1 MB/s catch-up limit, and a leader failover; then
// every query of every dashboard panel, run through Prometheus's HTTP API,
// returns data, and promtool accepts each node's /metrics.
func TestDashboardQueriesReturnDataFromACluster(t *testing.T) {
	promBin, promtool := needTool(t, "prometheus"), needTool(t, "promtool")
	if out, err := exec.Command(promtool, "check", "config", filepath.Join(dashboardsDir(), "prometheus.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config dashboards/prometheus.yml: %v\n%s", err, out)
	}
	// The end-to-end latency panel shows estimates only nodes that make
	// them have. The journal syncs the commits and checkpoints every
	// second, so both its panel and the syncfs panel have data.
	c := startCluster(t, 3, "--catchup-rate-limit", "1000000", "--e2e-processing-latency-percentile", "0.99",
		"--journal", "--journal-checkpoint", "1s")
	var targets []string
	for _, n := range c.nodes {
		targets = append(targets, n.HTTP)
	}
	sort.Strings(targets)
	prom := startPrometheus(t, promBin, targets)

	st := c.createTopic("dash", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=dash&channel=ch", "")
	for _, n := range c.nodes {
		checkMetrics(t, promtool, n.HTTP)
	}
	testnode.Eventually(t, 20*time.Second, "Prometheus scraping all three nodes", func() bool {
		return len(prom.query(t, `up == 1`)) == 3
	})

	// Writes, then a follower stopped long enough to leave the ISR and
	// resumed to catch up and rejoin it.
	p := producer(t, leader.TCP)
	publish := func(p *nsq.Producer, prefix string, n int) {
		for i := 0; i < n; i++ {
			if err := p.Publish("dash", []byte(fmt.Sprint(prefix, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(p, "a", 50)
	victim := c.followers(st)[0]
	c.nodes[victim].Cmd.Process.Signal(syscall.SIGSTOP)
	publish(p, "b", 20)
	c.nodes[victim].Cmd.Process.Signal(syscall.SIGCONT)
	i := 0
	testnode.Eventually(t, 20*time.Second, victim+" back in the ISR", func() bool {
		publish(p, fmt.Sprint("c", i, "-"), 1)
		i++
		return len(c.state("dash", 0).ISR) == 3
	})

	// The leader counted the ISR change, and Prometheus sees it. The
	// node's own /metrics first, so a failure says which of the two is
	// missing; Prometheus is given longer, since a scrape of a node under
	// a loaded machine's -race build can miss its 900 ms timeout.
	for _, name := range []string{"partita_isr_shrinks_total", "partita_isr_expands_total"} {
		testnode.Eventually(t, 10*time.Second, st.Leader+" exporting "+name+" for dash", func() bool {
			_, body := httpGet(t, leader.HTTP, "/metrics")
			return counted(body, name, `topic="dash"`)
		})
		expr := name + `{node="` + st.Leader + `", topic="dash"} >= 1`
		testnode.Eventually(t, 30*time.Second, expr, func() bool { return len(prom.query(t, expr)) > 0 })
	}

	// A second replica for a partition of 5 MiB in 20 MPUBs: a chunk of
	// 4 MiB, then the last one once the limit paid for the first, seconds
	// of catch-up that the move panels show.
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=dashmove&partition_num=1&replicator=1", ""); code != 200 {
		t.Fatalf("create dashmove: %d %s", code, body)
	}
	pad := strings.Repeat("x", 4<<10)
	for range 20 {
		body := strings.TrimSuffix(strings.Repeat(pad+"\n", 64), "\n")
		if code, resp := testnode.Post(t, c.nodes[c.state("dashmove", 0).Leader].HTTP, "/mpub?topic=dashmove", body); code != 200 {
			t.Fatalf("mpub dashmove: %d %s", code, resp)
		}
	}
	if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/topic/meta/update?topic=dashmove&replicator=2", ""); code != 200 {
		t.Fatalf("dashmove to two replicas: %d %s", code, body)
	}
	c.settled("dashmove", 2)
	for _, expr := range []string{
		`max(max_over_time(partita_cluster_moving_partitions[5m])) >= 1`,
		`max(max_over_time(partita_cluster_moving_replicas[5m])) >= 1`,
		`max(max_over_time(partita_partition_catchup_replicas{topic="dashmove"}[5m])) >= 1`,
		`sum(partita_replica_catchup_bytes_total{topic="dashmove"}) > 5242880`,
		`max(partita_catchup_rate_limit_bytes) == 1000000`,
	} {
		testnode.Eventually(t, 10*time.Second, expr, func() bool { return len(prom.query(t, expr)) > 0 })
	}

	// The leader fails; the controller elects another. The dead node stays
	// out of the ISR of dash, and of dashmove where it holds a replica.
	under := 1
	if slices.Contains(c.state("dashmove", 0).ISR, st.Leader) {
		under++
	}
	leader.Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("dash", 0).Leader
		return next != st.Leader
	})
	p2 := producer(t, c.nodes[next].TCP)
	testnode.Eventually(t, 10*time.Second, "writes at the new leader", func() bool {
		return p2.Publish("dash", []byte("probe")) == nil
	})
	publish(p2, "d", 50)
	subscribe(t, c.nodes[next].TCP, "dash", "ch")
	for id, n := range c.nodes {
		if id != st.Leader {
			checkMetrics(t, promtool, n.HTTP)
		}
	}
	// Enough scrapes after the failover for every rate to see two samples.
	since := time.Now()
	testnode.Eventually(t, 20*time.Second, "scrapes after the failover", func() bool {
		return time.Since(since) > 3*time.Second && len(prom.query(t, `partita_partition_is_leader{node="`+next+`", topic="dash"} == 1`)) == 1
	})

	// The events of the workload show in their metrics; the killed
	// leader's series count through their last value.
	for _, expr := range []string{
		`sum(max_over_time(partita_leader_elections_total{topic="dash"}[5m])) >= 2`, // the first leader and its successor
		`sum(max_over_time(partita_isr_shrinks_total{topic="dash"}[5m])) >= 1`,
		`sum(max_over_time(partita_isr_expands_total{topic="dash"}[5m])) >= 1`,
		`sum(partita_replica_ack_latency_seconds_count{topic="dash"}) > 0`,
		`sum(partita_commit_latency_seconds_count{topic="dash"}) > 0`,
		`sum(partita_syncfs_duration_seconds_count) > 0`,
		`sum(partita_journal_sync_duration_seconds_count) > 0`,
		`sum(partita_controller) == 1`,
		`max(partita_cluster_live_nodes) == 2`,
		fmt.Sprintf(`max(partita_cluster_under_replicated_partitions) == %d`, under),
		`sum(partita_partition_under_replicated{topic="dash"}) == 1`,
		`sum(partita_partition_is_leader{topic="dash"}) == 1`,
		`sum(partita_channel_consumers{node="` + next + `", topic="dash", channel="ch"}) == 1`,
		`sum(partita_actor_receive_duration_seconds_count{kind="replica"}) > 0`,
	} {
		testnode.Eventually(t, 10*time.Second, expr, func() bool { return len(prom.query(t, expr)) > 0 })
	}

	queries := 0
	for _, board := range readDashboards(t) {
		for _, panel := range board.Panels {
			for _, target := range panel.Targets {
				queries++
				expr := expand(target.Expr)
				testnode.Eventually(t, 10*time.Second, fmt.Sprintf("data for %s / %s: %s", board.Title, panel.Title, expr), func() bool {
					return len(prom.query(t, expr)) > 0
				})
			}
		}
	}
	t.Logf("%d panel queries returned data", queries)
}

// needTool finds a binary scripts/test.sh installs (Debian's prometheus).
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found (scripts/test.sh installs Debian's prometheus package): %v", name, err)
	}
	return path
}

// checkMetrics runs promtool's linter over a node's /metrics.
func checkMetrics(t *testing.T, promtool, hostport string) {
	t.Helper()
	resp, err := http.Get("http://" + hostport + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics on %s: %v\n%s", hostport, err, out)
	}
}

type promServer struct{ addr string }

// startPrometheus runs Prometheus on loopback, scraping targets every
// second into a temporary store; it is stopped when the test ends.
// counted reports whether a /metrics body has a sample of the counter name
// with the label given, above zero.
func counted(body, name, label string) bool {
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil && v > 0 {
			return true
		}
	}
	return false
}

func startPrometheus(t *testing.T, bin string, targets []string) *promServer {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: partita\n    static_configs:\n      - targets: ['%s']\n",
		strings.Join(targets, "', '"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t))
	var log bytes.Buffer
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	testnode.Eventually(t, 30*time.Second, "Prometheus ready", func() bool {
		select {
		case <-done:
			t.Fatalf("prometheus exited\n%s", log.String())
		default:
		}
		resp, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return &promServer{addr: addr}
}

// query runs an instant query and returns its result vector.
func (p *promServer) query(t *testing.T, expr string) []json.RawMessage {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Status, Error string
		Data          struct {
			Result []json.RawMessage
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if doc.Status != "success" {
		t.Fatalf("query %s: %s", expr, doc.Error)
	}
	return doc.Data.Result
}

type grafanaDashboard struct {
	Title  string
	Panels []struct {
		Title   string
		Targets []struct{ Expr string }
	}
}

func readDashboards(t *testing.T) []grafanaDashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir(), "json", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	var out []grafanaDashboard
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d grafanaDashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, d)
	}
	return out
}

// expand fills the dashboards' template variables as Grafana does with
// "All" selected, as dashboards.Expand in the dashboards module does.
func expand(expr string) string {
	return strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "$node", ".*", "$topic", ".*", "$channel", ".*").Replace(expr)
}

// subscribe connects a consumer that finishes every message, until the
// test ends.
func subscribe(t *testing.T, addr, topic, channel string) {
	t.Helper()
	c, err := nsq.NewConsumer(topic, channel, testnode.ConsumerConfig())
	if err != nil {
		t.Fatal(err)
	}
	c.SetLoggerLevel(nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error { return nil }))
	if err := c.ConnectToNSQD(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Stop()
		<-c.StopChan
	})
}
