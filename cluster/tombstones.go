package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Tombstones are nsqlookupd's "this node is leaving the topic" marks,
// kept under <prefix>tombstones/<topic>/<node HTTP address> on a lease so
// they lapse on their own, as nsqlookupd's do. Every node answers
// nsqlookupd's API, so the mark must be seen by the node named, not only by
// the one that received it.

func tombstonesPrefix(prefix string) string { return keyPrefix(prefix) + "tombstones/" }

func tombstoneKey(prefix, topic, node string) string {
	return tombstonesPrefix(prefix) + topic + "/" + node
}

// PutTombstone marks node for topic for ttl (whole seconds, at least one).
func PutTombstone(ctx context.Context, cli *clientv3.Client, prefix, topic, node string, ttl time.Duration) error {
	lease, err := cli.Grant(ctx, max(int64((ttl+time.Second-1)/time.Second), 1))
	if err != nil {
		return fmt.Errorf("tombstone lease: %w", err)
	}
	if _, err := cli.Put(ctx, tombstoneKey(prefix, topic, node), "", clientv3.WithLease(lease.ID)); err != nil {
		return fmt.Errorf("put tombstone: %w", err)
	}
	return nil
}

// TakeTombstone removes node's live mark for topic, reporting whether there
// was one; of two callers only one sees it.
func TakeTombstone(ctx context.Context, cli *clientv3.Client, prefix, topic, node string) (bool, error) {
	resp, err := cli.Delete(ctx, tombstoneKey(prefix, topic, node))
	if err != nil {
		return false, fmt.Errorf("take tombstone: %w", err)
	}
	return resp.Deleted > 0, nil
}

// Tombstones lists the live marks: node HTTP address → topics.
func Tombstones(ctx context.Context, cli *clientv3.Client, prefix string) (map[string]map[string]bool, error) {
	p := tombstonesPrefix(prefix)
	resp, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("list tombstones: %w", err)
	}
	out := map[string]map[string]bool{}
	for _, kv := range resp.Kvs {
		topic, node, ok := strings.Cut(strings.TrimPrefix(string(kv.Key), p), "/")
		if !ok {
			continue
		}
		if out[node] == nil {
			out[node] = map[string]bool{}
		}
		out[node][topic] = true
	}
	return out, nil
}
