package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
)

func testEtcdConfig(t *testing.T, dir string) EtcdConfig {
	t.Helper()
	client, peer := loopback.FreeAddr(t), loopback.FreeAddr(t)
	for peer == client {
		peer = loopback.FreeAddr(t)
	}
	return EtcdConfig{Name: "node1", DataDir: dir, ClientAddr: client, PeerAddr: peer, TickMs: 10, ElectionMs: 50}
}

func startEmbedded(cfg EtcdConfig) (*Embedded, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return StartEmbedded(ctx, cfg)
}

// startTestEtcd starts a member on fresh ports in dir, retrying when another
// process grabs a port between loopback.FreeAddr and the bind. It is closed when the
// test ends.
func startTestEtcd(t *testing.T, dir string) (*Embedded, EtcdConfig) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cfg := testEtcdConfig(t, dir)
		e, err := startEmbedded(cfg)
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 5 {
			continue
		}
		if err != nil {
			t.Fatalf("start embedded etcd: %v", err)
		}
		t.Cleanup(func() { e.Close() })
		return e, cfg
	}
}

// eventually fails the test unless cond becomes true within timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

func TestEmbeddedServesOnlyItsAddresses(t *testing.T) {
	e, cfg := startTestEtcd(t, t.TempDir())

	ctx := context.Background()
	if _, err := e.Client().Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := e.Client().Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get = %v, %v; want k=v", resp, err)
	}

	ecfg := e.etcd.Config()
	if len(ecfg.ListenClientHttpUrls) != 0 || len(ecfg.ListenMetricsUrls) != 0 {
		t.Errorf("extra listeners: http %v, metrics %v", ecfg.ListenClientHttpUrls, ecfg.ListenMetricsUrls)
	}
	urls := []struct {
		name string
		got  []string
		want string
	}{
		{"listen client", hosts(ecfg.ListenClientUrls), cfg.ClientAddr},
		{"advertise client", hosts(ecfg.AdvertiseClientUrls), cfg.ClientAddr},
		{"listen peer", hosts(ecfg.ListenPeerUrls), cfg.PeerAddr},
		{"advertise peer", hosts(ecfg.AdvertisePeerUrls), cfg.PeerAddr},
	}
	for _, u := range urls {
		if len(u.got) != 1 || u.got[0] != u.want {
			t.Errorf("%s urls = %v, want [%s]", u.name, u.got, u.want)
		}
	}
	if len(e.etcd.Clients) != 1 || e.etcd.Clients[0].Addr().String() != cfg.ClientAddr {
		t.Errorf("client listeners = %d, want one on %s", len(e.etcd.Clients), cfg.ClientAddr)
	}
	if len(e.etcd.Peers) != 1 || e.etcd.Peers[0].Addr().String() != cfg.PeerAddr {
		t.Errorf("peer listeners = %d, want one on %s", len(e.etcd.Peers), cfg.PeerAddr)
	}

	if err := e.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	for _, addr := range []string{cfg.ClientAddr, cfg.PeerAddr} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Close", addr)
		}
	}
}

func hosts(urls []url.URL) []string {
	var out []string
	for _, u := range urls {
		out = append(out, u.Host)
	}
	return out
}

func TestEmbeddedLeavesNoGoroutines(t *testing.T) {
	baseline := runtime.NumGoroutine()
	cfg := testEtcdConfig(t, t.TempDir())
	e, err := startEmbedded(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Put(context.Background(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	expectGoroutinesBackTo(t, baseline)
}

func expectGoroutinesBackTo(t *testing.T, baseline int) {
	t.Helper()
	if !eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= baseline }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("goroutines: %d now, %d before start\n%s",
			runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
	}
}

func TestEmbeddedBusyPort(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	tests := []struct {
		role string
		set  func(*EtcdConfig)
	}{
		{"client", func(c *EtcdConfig) { c.ClientAddr = busy.Addr().String() }},
		{"peer", func(c *EtcdConfig) { c.PeerAddr = busy.Addr().String() }},
	}
	for _, tt := range tests {
		t.Run(tt.role, func(t *testing.T) {
			cfg := testEtcdConfig(t, t.TempDir())
			tt.set(&cfg)
			e, err := startEmbedded(cfg)
			if err == nil {
				e.Close()
				t.Fatal("started on a busy port")
			}
			if !errors.Is(err, syscall.EADDRINUSE) {
				t.Errorf("error %v does not wrap EADDRINUSE", err)
			}
			want := tt.role + " address " + busy.Addr().String() + " is already in use"
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		})
	}
}

func TestEmbeddedRejectsBadConfig(t *testing.T) {
	good := EtcdConfig{Name: "n", DataDir: t.TempDir(), ClientAddr: "127.0.0.1:4379", PeerAddr: "127.0.0.1:4380"}
	tests := []struct {
		name string
		set  func(*EtcdConfig)
		want string
	}{
		{"no name", func(c *EtcdConfig) { c.Name = "" }, "empty member name"},
		{"no data dir", func(c *EtcdConfig) { c.DataDir = "" }, "empty data dir"},
		{"client without port", func(c *EtcdConfig) { c.ClientAddr = "127.0.0.1" }, "client address"},
		{"client port 0", func(c *EtcdConfig) { c.ClientAddr = "127.0.0.1:0" }, "port in 1-65535"},
		{"peer port not a number", func(c *EtcdConfig) { c.PeerAddr = "127.0.0.1:http" }, "port in 1-65535"},
		{"peer without host", func(c *EtcdConfig) { c.PeerAddr = ":4380" }, "has no host"},
		{"election shorter than ticks", func(c *EtcdConfig) { c.TickMs, c.ElectionMs = 100, 100 }, "election"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.set(&cfg)
			e, err := startEmbedded(cfg)
			if err == nil {
				e.Close()
				t.Fatal("started with a bad config")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestEmbeddedGivesUpWhenContextEnds(t *testing.T) {
	baseline := runtime.NumGoroutine()
	cfg := testEtcdConfig(t, t.TempDir())
	// A second member that never starts: no quorum, so never ready.
	cfg.InitialCluster = "node1=http://" + cfg.PeerAddr + ",node2=http://" + loopback.FreeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e, err := StartEmbedded(ctx, cfg)
	if err == nil {
		e.Close()
		t.Fatal("ready without quorum")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	if conn, err := net.DialTimeout("tcp", cfg.ClientAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("client address still served after a failed start")
	}
	expectGoroutinesBackTo(t, baseline)
}

// startThreeMembers forms a cluster of three members, m1 to m3, on fresh
// ports, and returns them with their "name=peer URL" entries. Another
// process can take a port between loopback.FreeAddr and the bind: the
// cluster is then formed again on new ports.
func startThreeMembers(t *testing.T) ([]*Embedded, []string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		cfgs := make([]EtcdConfig, 3)
		var initial []string
		for i := range cfgs {
			cfgs[i] = testEtcdConfig(t, t.TempDir())
			cfgs[i].Name = fmt.Sprintf("m%d", i+1)
			initial = append(initial, cfgs[i].Name+"=http://"+cfgs[i].PeerAddr)
		}
		members := make([]*Embedded, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range cfgs {
			cfgs[i].InitialCluster = strings.Join(initial, ",")
			wg.Go(func() { members[i], errs[i] = startEmbedded(cfgs[i]) })
		}
		wg.Wait()
		err := errors.Join(errs...)
		if err == nil {
			return members, initial
		}
		for _, m := range members {
			if m != nil {
				m.Close()
			}
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			t.Fatalf("start members: %v", err)
		}
	}
}

// The procedure in docs/operations.md for a lost embedded member: remove it
// from the cluster, add a new one with etcd's member API, and start it on an
// empty data directory with the cluster state "existing". The cluster is
// back to three members and the new one serves what was written before.
func TestReplaceLostEmbeddedMember(t *testing.T) {
	members, initial := startThreeMembers(t)
	defer members[0].Close()
	defer members[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cli := members[0].Client()
	if _, err := cli.Put(ctx, "before", "kept"); err != nil {
		t.Fatal(err)
	}

	// m3's machine is lost with its data.
	members[2].Close()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if m.Name == "m3" {
			if _, err := cli.MemberRemove(ctx, m.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	repl := testEtcdConfig(t, t.TempDir())
	repl.Name = "m4"
	// etcd refuses the add until the remaining members have been connected
	// for a while after the removal.
	var addErr error
	if !eventually(t, 15*time.Second, func() bool {
		_, addErr = cli.MemberAdd(ctx, []string{"http://" + repl.PeerAddr})
		return addErr == nil
	}) {
		t.Fatalf("member add: %v", addErr)
	}
	repl.InitialCluster = initial[0] + "," + initial[1] + ",m4=http://" + repl.PeerAddr
	repl.InitialClusterState = "existing"
	m4, err := startEmbedded(repl)
	if err != nil {
		t.Fatalf("start the replacement member: %v", err)
	}
	defer m4.Close()
	got, err := m4.Client().Get(ctx, "before")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "kept" {
		t.Fatalf("replacement member reads %v, %v", got, err)
	}
	list, err = cli.MemberList(ctx)
	if err != nil || len(list.Members) != 3 {
		t.Fatalf("members after the replacement: %v %v", list, err)
	}
}

// The member logs nowhere, so a slow request's text is never to be
// printed: etcd prints it before it asks the logger.
func TestEmbeddedPrintsNoSlowRequests(t *testing.T) {
	ecfg, err := embedConfig(testEtcdConfig(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if ecfg.WarningUnaryRequestDuration < 24*time.Hour || ecfg.WarningApplyDuration < 24*time.Hour {
		t.Errorf("slow-request warnings after %v (request) and %v (apply): a request slower than that is printed for a logger that drops it",
			ecfg.WarningUnaryRequestDuration, ecfg.WarningApplyDuration)
	}
}
