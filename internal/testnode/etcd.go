package testnode

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
)

// StartEtcd runs an etcd member in this process on fresh loopback ports,
// with short timers, for node processes to share as an external etcd: it
// returns the member and the host:port for their --etcd-endpoints. Call it
// before starting them, so it stops after they do.
func StartEtcd(t testing.TB) (*cluster.Embedded, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }
	// A free port can be taken by another test's process between the pick
	// and etcd's listen: a few fresh picks settle it.
	var e *cluster.Embedded
	var clientAddr string
	for attempt := 1; ; attempt++ {
		clientAddr = addr()
		var err error
		e, err = cluster.StartEmbedded(ctx, cluster.EtcdConfig{Name: "test", DataDir: t.TempDir(), ClientAddr: clientAddr, PeerAddr: addr(), TickMs: 10, ElectionMs: 50})
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || attempt == 5 {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { e.Close() })
	return e, clientAddr
}
