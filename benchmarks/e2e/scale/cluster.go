package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// node is one server process of the benchmark's cluster: a Partita node,
// or with --system=nats3 a nats-server (tcp its client port, http its
// monitoring port, peer its route port).
type node struct {
	idx                  int // 1, 2 or 3; node 1 hosts Partita's embedded etcd
	tcp, http, peer, log string
	pprof                string // serves /debug/pprof: Partita's http, nats-server's prof_port
	cmd                  *exec.Cmd
	exited               chan struct{} // closed once the process has been reaped
	exitErr              error
	killed               bool // by the benchmark's kill -9, so its exit is expected
}

func (n *node) alive() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

type cluster struct {
	system string // sysPartita or sysNATS
	nodes  []*node
}

// freePorts reserves n distinct loopback ports by holding listeners open
// until all are chosen, so the cluster never collides with another on the
// same machine (other people's test clusters use the fixed 1x415x ports).
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startCluster starts three nodes on loopback, node 1 with the embedded
// etcd and the others using it, each waited for on /ping before the next
// starts, as scripts/cluster.sh does.
func startCluster(ctx context.Context, bin, dir string, extra []string) (*cluster, error) {
	ports, err := freePorts(11)
	if err != nil {
		return nil, err
	}
	etcdClient := fmt.Sprintf("127.0.0.1:%d", ports[9])
	c := &cluster{system: sysPartita}
	for i := 1; i <= 3; i++ {
		p := ports[(i-1)*3:]
		n := &node{
			idx:  i,
			tcp:  fmt.Sprintf("127.0.0.1:%d", p[0]),
			http: fmt.Sprintf("127.0.0.1:%d", p[1]),
			peer: fmt.Sprintf("127.0.0.1:%d", p[2]),
			log:  filepath.Join(dir, fmt.Sprintf("node%d.log", i)),
		}
		n.pprof = n.http
		args := []string{
			"--node-id", fmt.Sprintf("n%d", i),
			"--data-path", filepath.Join(dir, fmt.Sprintf("data%d", i)),
			"--tcp-address", n.tcp, "--http-address", n.http, "--cluster-address", n.peer,
			"--etcd-client-address", etcdClient,
			"--etcd-peer-address", fmt.Sprintf("127.0.0.1:%d", ports[10]),
		}
		if i > 1 {
			args = append(args, "--etcd-endpoints", etcdClient)
		}
		args = append(args, extra...)
		if err := n.start(bin, args); err != nil {
			c.stop(10 * time.Second)
			return nil, err
		}
		c.nodes = append(c.nodes, n)
		if err := n.waitReady(ctx, "/ping", "OK", 90*time.Second); err != nil {
			c.stop(10 * time.Second)
			return nil, err
		}
	}
	return c, nil
}

func (n *node) start(bin string, args []string) error {
	f, err := os.Create(n.log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	// The node reads PARTITA_* variables as flags; a stray one in the
	// caller's environment would change what is measured.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PARTITA_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Should the driver itself be killed, the kernel takes the nodes down
	// with it instead of leaving a cluster running on a shared machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting node %d: %w", n.idx, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() {
		n.exitErr = cmd.Wait()
		close(n.exited)
	}()
	return nil
}

func (n *node) pid() int { return n.cmd.Process.Pid }

// waitReady polls path on the node's HTTP port until it answers 200 with
// body want (any body when want is "").
func (n *node) waitReady(ctx context.Context, path, want string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if !n.alive() {
			return fmt.Errorf("node %d exited during startup (%v); see %s:\n%s", n.idx, n.exitErr, n.log, tail(n.log, 15))
		}
		if body, err := httpGet(ctx, "http://"+n.http+path, time.Second); err == nil && (want == "" || string(body) == want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d did not answer %s within %v; see %s", n.idx, path, limit, n.log)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// kill9 is the failover phase's crash: no shutdown, no lease revoked.
func (n *node) kill9() error {
	n.killed = true
	return n.cmd.Process.Signal(syscall.SIGKILL)
}

// stop sends SIGTERM to each node in reverse start order (node 1's etcd
// last, so the others can deregister) and SIGKILL to one still running
// after limit. It names the nodes that needed SIGKILL or exited with an
// error.
func (c *cluster) stop(limit time.Duration) []string {
	var problems []string
	for i := len(c.nodes) - 1; i >= 0; i-- {
		n := c.nodes[i]
		if n.alive() {
			n.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-n.exited:
			case <-time.After(limit):
				n.cmd.Process.Signal(syscall.SIGKILL)
				<-n.exited
				problems = append(problems, fmt.Sprintf("node %d ignored SIGTERM for %v", n.idx, limit))
				continue
			}
		} else {
			<-n.exited
		}
		if n.exitErr != nil && !n.killed {
			problems = append(problems, fmt.Sprintf("node %d exited: %v", n.idx, n.exitErr))
		}
	}
	return problems
}

// died names the nodes that exited without being killed by the benchmark.
func (c *cluster) died() []string {
	var out []string
	for _, n := range c.nodes {
		if !n.alive() && !n.killed {
			out = append(out, fmt.Sprintf("node %d exited unexpectedly (%v); last log lines:\n%s", n.idx, n.exitErr, tail(n.log, 10)))
		}
	}
	return out
}

var httpClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func httpGet(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	return httpDo(ctx, http.MethodGet, url, timeout)
}

func httpDo(ctx context.Context, method, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return nil, err
	}
	return doRequest(req)
}

// doRequest sends req and reads the answer; any status but 200 is an
// error carrying the body.
func doRequest(req *http.Request) ([]byte, error) {
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("%s %s: %s %s", req.Method, req.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// The kernel reports CPU time in USER_HZ ticks, which is 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuTicks is the user plus system time of every server process, -1 when
// one could not be read.
func (c *cluster) cpuTicks() int64 {
	var sum int64
	for _, n := range c.nodes {
		t, err := cpuTicks(n.pid())
		if err != nil {
			return -1
		}
		sum += t
	}
	return sum
}

// cpuTicks is a process's user plus system time from /proc/<pid>/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	return utime + stime, errors.Join(err1, err2)
}

// rssMiB is VmRSS from /proc/<pid>/status.
func rssMiB(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func fdCount(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// machineTicks is the busy and total ticks of all cores from /proc/stat,
// to show how much else was running on the shared machine.
func machineTicks() (busy, total int64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	for i := 1; i < len(f) && i <= 8; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		total += v
		if i != 4 && i != 5 { // idle and iowait
			busy += v
		}
	}
	return busy, total
}

// goroutines reads the count from the pprof index that every node serves;
// unlike /metrics its size does not grow with the partitions.
func goroutines(ctx context.Context, n *node) (int, error) {
	body, err := httpGet(ctx, "http://"+n.pprof+"/debug/pprof/goroutine?debug=1", 30*time.Second)
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(body), "\n")
	v, ok := strings.CutPrefix(line, "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("unexpected goroutine profile header %q", line)
	}
	return strconv.Atoi(strings.TrimSpace(v))
}

// logSummary counts a node log's WARN and ERROR lines and names the most
// frequent message among them: Partita's "level=WARN … msg=…" lines, and
// nats-server's "[WRN] …" ones, whose message is the rest of the line.
func logSummary(path string) (warnings, errs int, top string) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, ""
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var msg string
		switch {
		case strings.Contains(line, " level=WARN "):
			warnings++
		case strings.Contains(line, " level=ERROR "):
			errs++
		case strings.Contains(line, " [WRN] "):
			warnings++
			_, msg, _ = strings.Cut(line, " [WRN] ")
		case strings.Contains(line, " [ERR] "):
			errs++
			_, msg, _ = strings.Cut(line, " [ERR] ")
		case strings.Contains(line, " [FTL] "):
			errs++
			_, msg, _ = strings.Cut(line, " [FTL] ")
		default:
			continue
		}
		if msg != "" {
			counts[natsMessage(msg)]++
			continue
		}
		msg = line
		if _, rest, ok := strings.Cut(line, " msg="); ok {
			if strings.HasPrefix(rest, `"`) {
				if end := strings.Index(rest[1:], `"`); end >= 0 {
					msg = rest[1 : end+1]
				}
			} else {
				msg, _, _ = strings.Cut(rest, " ")
			}
		}
		counts[msg]++
	}
	best := 0
	for m, c := range counts {
		if c > best || (c == best && m < top) {
			best, top = c, m
		}
	}
	if best > 0 {
		top = fmt.Sprintf("%q ×%d", top, best)
	}
	return warnings, errs, top
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	for i, l := range ls {
		if len(l) > 300 {
			ls[i] = l[:300] + "…"
		}
	}
	return "    " + strings.Join(ls, "\n    ")
}

// natsMessage keeps a nats-server log message's first clause, without the
// stream, peer or address that follows it in most, so that like messages
// count together.
func natsMessage(msg string) string {
	if i := strings.IndexAny(msg, "'\"[:0123456789"); i > 0 {
		msg = msg[:i]
	}
	return strings.TrimSpace(msg)
}
