package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/partitamq/partita/cluster"
)

// register records this node in etcd on a lease: peers find its
// replication address there, and the controller takes an expired lease for
// a dead node. After a crash the previous registration lives until its
// lease expires, so a quick restart waits for that. A lease lost later is
// replaced for as long as the node runs.
func (n *Node) register(ctx context.Context, id, host string) error {
	info := cluster.NodeInfo{
		ID:             id,
		ClusterAddress: n.cfg.ClusterAdvertise(n.clusterLn.Addr().String()),
		TCPAddress:     net.JoinHostPort(n.cfg.BroadcastAddress(), strconv.Itoa(n.tcpLn.Addr().(*net.TCPAddr).Port)),
		HTTPAddress:    net.JoinHostPort(n.cfg.BroadcastAddress(), strconv.Itoa(n.httpLn.Addr().(*net.TCPAddr).Port)),
		Hostname:       host,
		Zone:           n.cfg.Zone,
	}
	reg, err := n.registerOnce(ctx, info, false)
	if err != nil {
		return err
	}
	n.regMu.Lock()
	n.reg = reg
	n.regMu.Unlock()
	kctx, cancel := context.WithCancel(context.Background())
	n.stopRegister = cancel
	go n.keepRegistered(kctx, info, reg)
	return nil
}

// registerOnce registers the node, waiting out a previous registration of
// the same ID; persistent also retries etcd's errors, for a node that runs
// already and must get back into the cluster.
func (n *Node) registerOnce(ctx context.Context, info cluster.NodeInfo, persistent bool) (*cluster.Registration, error) {
	for {
		reg, err := cluster.RegisterObserved(ctx, n.leaseClient, metaPrefix, info, n.cfg.NodeLeaseTTL, n.metrics.ObserveKeepalive)
		switch {
		case err == nil:
			return reg, nil
		case errors.Is(err, cluster.ErrNodeRegistered):
			n.log.Warn("node ID still registered, waiting for the old lease to expire", "node", info.ID)
		case !persistent:
			return nil, fmt.Errorf("registering node %s: %w", info.ID, err)
		default:
			n.log.Warn("registering node", "node", info.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("registering node %s: %w", info.ID, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// keepRegistered registers the node again whenever its lease is lost: etcd
// was unreachable for longer than the TTL, or expired the lease while it
// was paused. Until then the node is absent from lookups and the
// controller's live set, and its partitions' leaders keep serving writes.
func (n *Node) keepRegistered(ctx context.Context, info cluster.NodeInfo, reg *cluster.Registration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-reg.Lost():
		}
		if ctx.Err() != nil {
			return
		}
		n.metrics.RegistrationLost()
		n.log.Warn("node registration lost; registering again", "node", info.ID)
		next, err := n.registerOnce(ctx, info, true)
		if err != nil {
			return // stopping
		}
		n.regMu.Lock()
		n.reg = next
		n.regMu.Unlock()
		n.log.Info("node registered again", "node", info.ID)
		reg = next
	}
}
