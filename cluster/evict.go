package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A node that dies leaves its registration in etcd until its lease lapses:
// the lease's TTL after its last renewal, plus up to half a second until
// etcd's expiry sweep notices. Its sockets close at once, though, and a
// peer that then finds the node's cluster port refusing connections knows
// the process that registered is gone: a node binds that port before it
// registers and closes it only when it stops. EvictIfGone lets such a peer
// end the registration at once, so the controller fails the node's
// partitions over without waiting for the lease, and the node's campaign
// for the controller's office, so another node takes the office at once if
// the dead one held it.

// electionPrefix is where the controller's campaign keys are: one per
// candidate, named for its session's lease, holding its node ID.
func electionPrefix(prefix string) string { return prefix + "controller" }

// EvictIfGone revokes the lease of node id's registration, and that of its
// controller campaign if it has one, when gone, asked after both were read,
// reports the node's process gone. The order is what makes it safe: a new
// process of the same node registers and campaigns only after binding its
// port, so if gone saw the port refusing, what was read before is the old
// process's, and whatever was made since carries another lease, which
// stays. It reports whether the registration was revoked.
func EvictIfGone(ctx context.Context, cli *clientv3.Client, prefix, id string, gone func(NodeInfo) bool) (bool, error) {
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(nodesPrefix(prefix)+id),
		clientv3.OpGet(electionPrefix(prefix)+"/", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("evict node %q: %w", id, err)
	}
	reg := resp.Responses[0].GetResponseRange().GetKvs()
	if len(reg) == 0 || reg[0].Lease == 0 {
		return false, nil
	}
	info, err := unmarshalNode(reg[0].Value)
	if err != nil {
		return false, fmt.Errorf("evict node %q: %w", id, err)
	}
	if !gone(info) {
		return false, nil
	}
	leases := []int64{reg[0].Lease}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if string(kv.Value) == id && kv.Lease != 0 {
			leases = append(leases, kv.Lease) // its campaign: the office, if it held it
		}
	}
	for _, l := range leases {
		if err := revoke(ctx, cli, clientv3.LeaseID(l)); err != nil {
			return false, fmt.Errorf("evict node %q: %w", id, err)
		}
	}
	return true, nil
}

// ElectedController is the node ID of the cluster's controller and the
// revision its campaign key was created at, which grows with each
// election; "" while none is elected. etcd's concurrency package elects
// the campaign key created first.
func ElectedController(ctx context.Context, cli *clientv3.Client, prefix string) (string, int64, error) {
	resp, err := cli.Get(ctx, electionPrefix(prefix)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", 0, fmt.Errorf("read the controller: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", 0, nil
	}
	return string(resp.Kvs[0].Value), resp.Kvs[0].CreateRevision, nil
}
