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
// port is the proof (cluster.EvictIfGone says why), and only when its HTTP
// port refuses too: a process that exited closed both, while a live node
// whose cluster port refused one connect (a full accept queue, a listener
// being replaced) still answers on the other. A silent peer, a cut network
// or a timeout proves nothing and leaves the lease to decide.
type deathProbe struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger
	again  []time.Duration // pauses before each probe after the first (probeAgain)
	// evicted, if set, counts each peer this probe evicted.
	evicted func()

	mu      sync.Mutex
	probing map[string]bool // node ID → a probe under way
}

// probeTimeout bounds the connect that tells a dead peer from a live one;
// a refusal comes back within a round trip.
const probeTimeout = time.Second

// probeAgain are the pauses before each probe after the first. A killed
// process's sockets close one by one as it exits, so its sessions can
// break while its cluster port still completes connects; and an etcd slow
// to answer fails a probe that would have found the peer gone. A live
// peer costs a few connects more.
var probeAgain = []time.Duration{100 * time.Millisecond, 400 * time.Millisecond, 1500 * time.Millisecond}

func newDeathProbe(cli *clientv3.Client, prefix string, log *slog.Logger) *deathProbe {
	return &deathProbe{cli: cli, prefix: prefix, log: log, again: probeAgain, probing: map[string]bool{}}
}

// sessionBroke probes node until it is found gone, at most once more
// after each of again's pauses, whatever number of its sessions broke at
// the same moment.
func (d *deathProbe) sessionBroke(node string, cause error) {
	// Every partition the two nodes share saw its stream go down with the
	// session: worth a line whatever the probe finds.
	d.log.Warn("replication session to a peer broke", "node", node, "err", cause)
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
	evicted, err := d.probe(node)
	for _, pause := range d.again {
		if evicted {
			break
		}
		time.Sleep(pause)
		evicted, err = d.probe(node)
	}
	switch {
	case err != nil:
		d.log.Warn("probing a peer whose replication session broke", "node", node, "err", err)
	case evicted:
		if d.evicted != nil {
			d.evicted()
		}
		d.log.Warn("peer's cluster port refuses connections: its process is gone, so its registration is revoked and its partitions fail over now",
			"node", node, "session", cause)
	}
}

// probe evicts node if its cluster and HTTP ports both refuse
// connections.
func (d *deathProbe) probe(node string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*probeTimeout)
	defer cancel()
	return cluster.EvictIfGone(ctx, d.cli, d.prefix, node, func(info cluster.NodeInfo) bool {
		return refused(ctx, info.ClusterAddress, probeTimeout) && refused(ctx, info.HTTPAddress, probeTimeout)
	})
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
