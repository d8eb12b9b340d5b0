package cluster

import (
	"context"
	"errors"
	"slices"
	"strings"
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
