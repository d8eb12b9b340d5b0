// Package nsqtools runs nsqio's own tools, built unchanged from
// github.com/nsqio/nsq v1.3.0, against a three-node Partita cluster of real
// node processes, and compares Partita's HTTP answers with nsqd's and
// nsqlookupd's own. It is a module of its own so that nsq, nsqadmin's
// dependencies and the browser driver stay out of the product's go.mod.
package nsqtools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// waitFor bounds every condition a test polls for.
const waitFor = 30 * time.Second

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds the node (from the parent module) and nsq's tools (at
// the versions this module pins) once, into one directory.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		here := filepath.Dir(file)
		binDir, buildErr = os.MkdirTemp("", "partita-nsqtools")
		if buildErr != nil {
			return
		}
		steps := []struct {
			dir  string
			args []string
		}{
			{filepath.Join(here, "..", ".."), []string{"build", "-o", filepath.Join(binDir, "partita"), "./cmd/node"}},
			{here, []string{"build", "-o", binDir + string(os.PathSeparator),
				"github.com/nsqio/nsq/apps/nsq_tail", "github.com/nsqio/nsq/apps/nsq_to_file",
				"github.com/nsqio/nsq/apps/nsq_stat", "github.com/nsqio/nsq/apps/to_nsq",
				"github.com/nsqio/nsq/apps/nsqadmin", "github.com/nsqio/nsq/apps/nsqd",
				"github.com/nsqio/nsq/apps/nsqlookupd"}},
		}
		for _, s := range steps {
			cmd := exec.Command("go", s.args...)
			cmd.Dir = s.dir
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(s.args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// node is one Partita node process.
type node struct {
	id, tcp, http string
	proc          *process
}

// process is a child process whose output is kept for failure messages.
type process struct {
	cmd    *exec.Cmd
	out    *lockedBuffer // stdout and stderr as they came
	stdout *lockedBuffer // stdout alone, for tools whose output is checked
	done   chan struct{}
	err    error
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start runs a program; when the test ends it gets SIGTERM, then SIGKILL
// if it has not exited within five seconds.
func start(t *testing.T, stdin io.Reader, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(filepath.Join(binaries(t), name), args...),
		out: &lockedBuffer{}, stdout: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd.Stdin = stdin
	p.cmd.Stdout, p.cmd.Stderr = io.MultiWriter(p.out, p.stdout), p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop(5 * time.Second) })
	return p
}

// stop ends the process with SIGTERM, or SIGKILL after grace.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// wait requires the process to exit successfully within d.
func (p *process) wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s still running after %v\n%s", p.cmd.Path, d, p.out)
	}
	if p.err != nil {
		t.Fatalf("%s: %v\n%s", p.cmd.Path, p.err, p.out)
	}
}

// loopbackAddrs returns n loopback addresses that were free a moment ago;
// all are held until every one is picked, so none repeats.
func loopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	out := make([]string, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		out[i] = ln.Addr().String()
	}
	return out
}

// startCluster runs three nodes: n1 with the embedded etcd, n2 and n3
// using it, as scripts/cluster.sh does, each with the extra flags. They
// stop in reverse order, n1 and its etcd last.
func startCluster(t *testing.T, extra ...string) []*node {
	t.Helper()
	var etcdAddr string
	var nodes []*node
	for i := 1; i <= 3; i++ {
		addrs := loopbackAddrs(t, 5)
		n := &node{id: fmt.Sprintf("n%d", i), tcp: addrs[0], http: addrs[1]}
		args := []string{"--node-id", n.id, "--data-path", t.TempDir(),
			"--tcp-address", addrs[0], "--http-address", addrs[1], "--cluster-address", addrs[2],
			"--etcd-client-address", addrs[3], "--etcd-peer-address", addrs[4],
			"--etcd-tick-ms", "10", "--etcd-election-ms", "50", "--log-level", "warn"}
		args = append(args, extra...)
		if i == 1 {
			etcdAddr = addrs[3]
		} else {
			args = append(args, "--etcd-endpoints", etcdAddr)
		}
		n.proc = start(t, nil, "partita", args...)
		waitPing(t, n.id, n.proc, n.http)
		nodes = append(nodes, n)
	}
	eventually(t, "every node sees the three nodes", func() bool {
		for _, n := range nodes {
			var doc struct{ Producers []json.RawMessage }
			if getJSON(n.http+"/nodes", &doc) != nil || len(doc.Producers) != 3 {
				return false
			}
		}
		return true
	})
	return nodes
}

// createTopic makes a topic with three partitions, each on all three
// nodes, and its channels, and waits until every node's /lookup names a
// leader for every partition.
func createTopic(t *testing.T, nodes []*node, topic string, channels ...string) {
	t.Helper()
	mustPost(t, nodes[0].http+"/topic/create?topic="+topic+"&partition_num=3&replicator=3", "")
	for _, c := range channels {
		mustPost(t, nodes[0].http+"/channel/create?topic="+topic+"&channel="+c, "")
	}
	eventually(t, topic+"'s partitions have leaders everywhere", func() bool {
		for _, n := range nodes {
			var doc struct {
				Channels   []string
				Partitions map[string]json.RawMessage
			}
			if getJSON(n.http+"/lookup?topic="+topic, &doc) != nil || len(doc.Partitions) != 3 || len(doc.Channels) != len(channels) {
				return false
			}
		}
		return true
	})
	// A channel reaches each partition's leader through etcd a moment after
	// /channel/create answers, and one opened after a publish starts past
	// it; the tests here are about the tools, so they publish only once
	// every leader has every channel.
	eventually(t, topic+"'s channels open on every partition's leader", func() bool {
		open := 0
		for _, n := range nodes {
			var doc struct {
				Topics []struct {
					Channels []struct {
						Name string `json:"channel_name"`
					} `json:"channels"`
				} `json:"topics"`
			}
			if getJSON(n.http+"/stats?format=json&leaders_only=true&topic="+topic, &doc) != nil {
				return false
			}
			for _, tp := range doc.Topics {
				if len(tp.Channels) == len(channels) {
					open++
				}
			}
		}
		return open == 3
	})
}

// channelDepth is a channel's depth over the whole cluster: the sum over
// every node of the partitions it leads.
func channelDepth(t *testing.T, nodes []*node, topic, channel string) int64 {
	t.Helper()
	var total int64
	for _, n := range nodes {
		var doc struct {
			Topics []struct {
				Channels []struct {
					Name  string `json:"channel_name"`
					Depth int64  `json:"depth"`
				} `json:"channels"`
			} `json:"topics"`
		}
		if err := getJSON(n.http+"/stats?format=json&leaders_only=true&topic="+topic, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tp := range doc.Topics {
			for _, c := range tp.Channels {
				if c.Name == channel {
					total += c.Depth
				}
			}
		}
	}
	return total
}

// waitPing waits for a started server to answer /ping on httpAddr.
func waitPing(t *testing.T, name string, p *process, httpAddr string) {
	t.Helper()
	eventually(t, name+" answers /ping", func() bool {
		select {
		case <-p.done:
			t.Fatalf("%s exited at start: %v\n%s", name, p.err, p.out)
		default:
		}
		code, _ := get(httpAddr + "/ping")
		return code == http.StatusOK
	})
}

// do makes one HTTP request and returns the status and body.
func do(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func get(url string) (int, []byte) {
	resp, err := http.Get("http://" + url)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

func getJSON(url string, v any) error {
	code, body := get(url)
	if code != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, code, body)
	}
	return json.Unmarshal(body, v)
}

func mustPost(t *testing.T, url, body string) {
	t.Helper()
	resp, err := http.Post("http://"+url, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
}

// eventually polls cond until it holds, failing the test after waitFor.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for ; !cond(); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}
