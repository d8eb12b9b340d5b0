package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/loopback"
)

// A port nobody listens on refuses; a process that listens but is frozen
// (SIGSTOP: the kernel still completes the handshake) does not.
func TestRefusedTellsAGoneProcessFromAFrozenOne(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close() // never accepts
	if refused(context.Background(), frozen.Addr().String(), time.Second) {
		t.Error("a listening port counted as refusing")
	}
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := gone.Addr().String()
	gone.Close()
	if !refused(context.Background(), addr, time.Second) {
		t.Error("a closed port not counted as refusing")
	}
}

// A killed process's sessions can break before its cluster port closes:
// the first probe finds the port still accepting, and a later one, once
// it is closed, evicts the node. A peer that stays up is never evicted.
func TestDeathProbeTriesAgainWhileThePortCloses(t *testing.T) {
	e, err := cluster.StartEmbedded(context.Background(), cluster.EtcdConfig{
		Name: "probe", DataDir: t.TempDir(), ClientAddr: loopback.FreeAddr(t), PeerAddr: loopback.FreeAddr(t), TickMs: 10, ElectionMs: 50,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	cli := e.Client()
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	// register returns the node's cluster port and HTTP port.
	register := func(id string) (net.Listener, net.Listener, *cluster.Registration) {
		port, web := listen(), listen()
		reg, err := cluster.Register(context.Background(), cli, "", cluster.NodeInfo{ID: id, ClusterAddress: port.Addr().String(), HTTPAddress: web.Addr().String()}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		return port, web, reg
	}
	d := newDeathProbe(cli, "", slog.New(slog.DiscardHandler))
	d.again = []time.Duration{time.Millisecond, time.Millisecond}

	_, _, alive := register("alive")
	d.sessionBroke("alive", errors.New("the session broke, the peer lives")) // every probe finds the port accepting
	select {
	case <-alive.Lost():
		t.Fatal("a peer whose port accepts was evicted")
	default:
	}

	// A live node's cluster port refusing is no proof while its HTTP port
	// answers.
	busyPort, _, busy := register("busy")
	busyPort.Close()
	d.sessionBroke("busy", errors.New("the cluster port refused, the node lives"))
	select {
	case <-busy.Lost():
		t.Fatal("a peer whose HTTP port accepts was evicted on its cluster port alone")
	default:
	}

	port, web, killed := register("killed")
	web.Close()
	d.again = slices.Repeat([]time.Duration{20 * time.Millisecond}, 50)
	go func() {
		c, err := port.Accept() // the first probe's connect: the process is still exiting
		if err == nil {
			c.Close()
		}
		port.Close() // and now it is gone
	}()
	d.sessionBroke("killed", errors.New("the peer was killed"))
	select {
	case <-killed.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the node whose port closed after the first probe was not evicted")
	}
}
