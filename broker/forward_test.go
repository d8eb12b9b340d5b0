package broker

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/partitamq/partita/cluster"
)

// Concurrent forwards share a few kept-alive connections to the leader
// instead of dialing one per publish.
func TestForwardsReuseConnectionsToTheLeader(t *testing.T) {
	var conns, pubs atomic.Int64
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pubs.Add(1)
		w.Write([]byte("OK"))
	}))
	leader.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	leader.Start()
	defer leader.Close()

	b := &Broker{cfg: Config{NodeID: "n1"}, nodes: map[string]cluster.NodeInfo{"n2": {ID: "n2", HTTPAddress: leader.Listener.Addr().String()}}}
	b.leaderOf.Store(partitionKey{"t", 0}, "n2")
	const workers, each = 16, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0); err != nil {
					t.Errorf("forward: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if pubs.Load() != workers*each {
		t.Fatalf("leader got %d publishes, want %d", pubs.Load(), workers*each)
	}
	if n := conns.Load(); n > 2*workers {
		t.Fatalf("%d forwards opened %d connections to the leader; want at most %d", workers*each, n, 2*workers)
	}
}
