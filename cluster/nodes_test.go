package cluster

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func testNode(id string) NodeInfo {
	return NodeInfo{ID: id, ClusterAddress: id + ":4160", TCPAddress: id + ":4150", HTTPAddress: id + ":4151", Hostname: "host-" + id}
}

func mustRegister(t *testing.T, cli *clientv3.Client, info NodeInfo) *Registration {
	t.Helper()
	r, err := Register(context.Background(), cli, "", info, time.Second)
	if err != nil {
		t.Fatalf("register %s: %v", info.ID, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func liveNodes(t *testing.T, cli *clientv3.Client, prefix string) []NodeInfo {
	t.Helper()
	nodes, err := Nodes(context.Background(), cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func TestRegisterNode(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	cli := e.Client()
	ctx := context.Background()

	b := mustRegister(t, cli, testNode("b"))
	mustRegister(t, cli, testNode("a"))
	if got, want := liveNodes(t, cli, ""), []NodeInfo{testNode("a"), testNode("b")}; !slices.Equal(got, want) {
		t.Fatalf("Nodes = %+v, want %+v", got, want)
	}
	if got := liveNodes(t, cli, "/elsewhere"); len(got) != 0 {
		t.Errorf("Nodes under another prefix = %+v", got)
	}

	impostor := testNode("b")
	impostor.Hostname = "impostor"
	_, err := Register(ctx, cli, "", impostor, time.Second)
	if !errors.Is(err, ErrNodeRegistered) || !strings.Contains(err.Error(), `"host-b"`) {
		t.Fatalf("duplicate registration: %v; want ErrNodeRegistered naming the holder", err)
	}
	if got := liveNodes(t, cli, ""); !slices.Equal(got, []NodeInfo{testNode("a"), testNode("b")}) {
		t.Fatalf("after refused duplicate: %+v", got)
	}

	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := liveNodes(t, cli, ""); !slices.Equal(got, []NodeInfo{testNode("a")}) {
		t.Errorf("right after Close: %+v", got)
	}
	select {
	case <-b.Lost():
	default:
		t.Error("Lost not closed after Close")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	mustRegister(t, cli, impostor)
	if got := liveNodes(t, cli, ""); !slices.Equal(got, []NodeInfo{testNode("a"), impostor}) {
		t.Errorf("after re-registering b: %+v", got)
	}
}

func TestRegisterLeaseTTL(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	cli := e.Client()
	// With ElectionMs 50 etcd's minimum TTL, ceil(1.5 × 50ms), is 1s, so
	// what is asked is granted, rounded up to whole seconds.
	tests := []struct {
		ttl, want time.Duration
	}{
		{time.Second, time.Second},
		{1500 * time.Millisecond, 2 * time.Second},
		{time.Millisecond, time.Second},
	}
	for i, tt := range tests {
		r, err := Register(context.Background(), cli, "", testNode(string(rune('a'+i))), tt.ttl)
		if err != nil {
			t.Fatal(err)
		}
		if r.TTL() != tt.want {
			t.Errorf("TTL for %s = %s, want %s", tt.ttl, r.TTL(), tt.want)
		}
		r.Close()
	}
}

func TestRegisterRejectsBadInput(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	tests := []struct {
		name string
		id   string
		ttl  time.Duration
		want string
	}{
		{"empty ID", "", time.Second, "must be 1-255 characters"},
		{"long ID", strings.Repeat("n", 256), time.Second, "must be 1-255 characters"},
		{"slash", "a/b", time.Second, "no '/'"},
		{"space", "a b", time.Second, "no '/', spaces"},
		{"newline", "a\n", time.Second, "control characters"},
		{"zero TTL", "a", 0, "TTL must be positive"},
		{"negative TTL", "a", -time.Second, "TTL must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Register(context.Background(), e.Client(), "", testNode(tt.id), tt.ttl)
			if err == nil {
				r.Close()
				t.Fatal("registered")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
	if got := liveNodes(t, e.Client(), ""); len(got) != 0 {
		t.Errorf("nodes after refused registrations: %+v", got)
	}
}

func TestRegistrationExpiresWhenKeepaliveStops(t *testing.T) {
	e, cfg := startTestEtcd(t, t.TempDir())
	nodeClient := newTestClient(t, cfg.ClientAddr)
	r, err := Register(context.Background(), nodeClient, "", testNode("a"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got := liveNodes(t, e.Client(), ""); len(got) != 1 {
		t.Fatalf("registered node not listed: %+v", got)
	}

	// Closing the client stops the keepalives without revoking the lease,
	// as a crash would.
	nodeClient.Close()
	select {
	case <-r.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("Lost not closed after the client closed")
	}
	// The lease was renewed at most TTL/3 ago; etcd looks for expired
	// leases every 500ms, then revokes them through raft.
	expiry := r.TTL() + 1500*time.Millisecond
	if !eventually(t, expiry, func() bool { return len(liveNodes(t, e.Client(), "")) == 0 }) {
		t.Fatalf("node still listed %s after its keepalives stopped", expiry)
	}
	if err := r.Close(); err == nil || !strings.Contains(err.Error(), "client closed") {
		t.Errorf("Close through a closed client: %v", err)
	}
	mustRegister(t, e.Client(), testNode("a"))
}

func TestWatchNodesFollowsJoinsAndLeaves(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	cli := e.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ch := WatchNodes(ctx, cli, "")
	if got := receive(t, ch); len(got) != 0 {
		t.Fatalf("first set = %+v, want empty", got)
	}
	b := mustRegister(t, cli, testNode("b"))
	if got := receive(t, ch); !slices.Equal(got, []NodeInfo{testNode("b")}) {
		t.Fatalf("after b joined: %+v", got)
	}
	a := mustRegister(t, cli, testNode("a"))
	if got := receive(t, ch); !slices.Equal(got, []NodeInfo{testNode("a"), testNode("b")}) {
		t.Fatalf("after a joined: %+v", got)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ch); !slices.Equal(got, []NodeInfo{testNode("a")}) {
		t.Fatalf("after b left: %+v", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ch); len(got) != 0 {
		t.Fatalf("after a left: %+v", got)
	}

	cancel()
	expectClosed(t, ch)
}

// A lease etcd renews on time but answers late is kept: the client's
// keepalive stream gives up after a TTL without an answer, and the
// registration asks etcd again instead of reporting the lease lost, so
// the node keeps its key (and its partitions) through a stall of its
// answers three TTLs long.
func TestRegistrationOutlivesLateAnswers(t *testing.T) {
	e, cfg := startTestEtcd(t, t.TempDir())
	proxy := startLateProxy(t, cfg.ClientAddr)
	renewals := make(chan time.Duration, 1024)
	r, err := RegisterObserved(context.Background(), newTestClient(t, proxy.ln.Addr().String()), "", testNode("a"), time.Second,
		func(gap time.Duration) { renewals <- gap })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	<-renewals

	proxy.hold(true)
	stall := time.NewTimer(3 * r.TTL())
	for stalled := false; !stalled; {
		select {
		case <-stall.C:
			stalled = true
		case <-renewals:
			t.Fatal("a renewal was answered while answers were held")
		case <-r.Lost():
			t.Fatal("the registration reported its lease lost while etcd renewed it")
		}
		if got := liveNodes(t, e.Client(), ""); len(got) != 1 {
			t.Fatalf("the node's key left etcd while its renewals reached it: %+v", got)
		}
	}
	proxy.hold(false)

	// Renewals go on after the stall, and the gap they report covers it.
	select {
	case gap := <-renewals:
		if gap < 3*r.TTL() {
			t.Errorf("first renewal after a stall of %v reports a gap of %v", 3*r.TTL(), gap)
		}
	case <-r.Lost():
		t.Fatal("the registration reported its lease lost once answers came again")
	case <-time.After(waitTimeout):
		t.Fatal("no renewal after the stall")
	}
	for range 3 {
		select {
		case <-renewals:
		case <-r.Lost():
			t.Fatal("the registration reported its lease lost after the stall")
		case <-time.After(waitTimeout):
			t.Fatal("renewals stopped after the stall")
		}
	}
	if got := liveNodes(t, e.Client(), ""); len(got) != 1 {
		t.Fatalf("the node's key left etcd: %+v", got)
	}
}

// Renewals that reach etcd late, as they reach an etcd starved of CPU by
// the load it serves, still keep the lease: they go out on time whether or
// not the one before was answered, so etcd renews the lease with each one
// it reads. A renewal sent a third of the TTL after the last answer would
// reach etcd a TTL or more after the one before, and the lease would lapse.
func TestRegistrationOutlivesLateRenewals(t *testing.T) {
	e, cfg := startTestEtcd(t, t.TempDir())
	proxy := startLateProxy(t, cfg.ClientAddr)
	r, err := Register(context.Background(), newTestClient(t, proxy.ln.Addr().String()), "", testNode("a"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := WatchNodes(ctx, e.Client(), "")
	if got := receive(t, nodes); len(got) != 1 {
		t.Fatalf("registered node not listed: %+v", got)
	}
	proxy.setLag(r.TTL() * 7 / 10)
	late := time.NewTimer(4 * r.TTL())
	defer late.Stop()
	select {
	case <-late.C:
	case got := <-nodes:
		t.Fatalf("the node's key left etcd while its renewals reached etcd %v late: %+v", r.TTL()*7/10, got)
	case <-r.Lost():
		t.Fatal("the registration reported its lease lost while its renewals reached etcd")
	}
}

// lateProxy forwards TCP connections to target and, while held, keeps
// what the target answers until it is let go: requests arrive on time,
// their answers late. With a lag, requests reach the target that late, as
// they reach an etcd too busy to read them.
type lateProxy struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	cond    *sync.Cond
	held    bool
	lag     time.Duration
	closed  bool
	conns   []net.Conn
	pending sync.WaitGroup
}

func startLateProxy(t *testing.T, target string) *lateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lateProxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	p.pending.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		p.closed = true
		for _, c := range p.conns {
			c.Close()
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		p.pending.Wait()
	})
	return p
}

func (p *lateProxy) setLag(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lag = d
}

// request copies the client's bytes to the target, each read delivered
// the proxy's lag after it was read.
func (p *lateProxy) request(in, out net.Conn) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 1<<16)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := in.Read(buf)
			if n > 0 {
				p.mu.Lock()
				due := time.Now().Add(p.lag)
				p.mu.Unlock()
				chunks <- chunk{buf[:n], due}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due)) // the lag itself, not a wait for an event
		if _, err := out.Write(c.b); err != nil {
			return
		}
	}
}

func (p *lateProxy) hold(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = on
	p.cond.Broadcast()
}

func (p *lateProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.pending.Go(func() { p.request(in, out); out.Close() })
		p.pending.Go(func() { p.answer(in, out); in.Close() })
	}
}

// answer copies the target's bytes to the client, each read waiting
// while answers are held; the target's side is read on meanwhile, so it
// never waits on the client.
func (p *lateProxy) answer(in, out net.Conn) {
	chunks := make(chan []byte, 1<<16)
	go func() {
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := out.Read(buf)
			if n > 0 {
				chunks <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	for b := range chunks {
		p.mu.Lock()
		for p.held && !p.closed {
			p.cond.Wait()
		}
		p.mu.Unlock()
		if _, err := in.Write(b); err != nil {
			return
		}
	}
}
