package node

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/partitamq/partita/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// deathProbe turns a broken replication session into a failover at once
// when the peer's process is gone: a killed node's partitions would
// otherwise wait for its lease to lapse (the lease's TTL and up to half a
// second of etcd's expiry sweep). A refused connect to the peer's cluster
// port is the proof (cluster.EvictIfGone says why); a silent peer, a cut
// network or a timeout proves nothing and leaves the lease to decide.
type deathProbe struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu      sync.Mutex
	probing map[string]bool // node ID → a probe under way
}

// probeTimeout bounds the connect that tells a dead peer from a live one;
// a refusal comes back within a round trip.
const probeTimeout = time.Second

func newDeathProbe(cli *clientv3.Client, prefix string, log *slog.Logger) *deathProbe {
	return &deathProbe{cli: cli, prefix: prefix, log: log, probing: map[string]bool{}}
}

// sessionBroke probes node once, whatever number of its sessions broke at
// the same moment.
func (d *deathProbe) sessionBroke(node string, cause error) {
	d.mu.Lock()
	if d.probing[node] {
		d.mu.Unlock()
		return
	}
	d.probing[node] = true
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.probing, node)
		d.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*probeTimeout)
	defer cancel()
	evicted, err := cluster.EvictIfGone(ctx, d.cli, d.prefix, node, func(info cluster.NodeInfo) bool {
		return refused(ctx, info.ClusterAddress, probeTimeout)
	})
	switch {
	case err != nil:
		d.log.Warn("probing a peer whose replication session broke", "node", node, "err", err)
	case evicted:
		d.log.Warn("peer's cluster port refuses connections: its process is gone, so its registration is revoked and its partitions fail over now",
			"node", node, "session", cause)
	}
}

// refused reports whether a connect to addr was refused: nothing listens
// there.
func refused(ctx context.Context, addr string, timeout time.Duration) bool {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
