package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// startZoned starts a node process for each node of zones, with its zone,
// and waits until all are registered.
func startZoned(t *testing.T, zones map[string]string) *testCluster {
	c := startCluster(t, 0)
	for id, zone := range zones {
		c.nodes[id] = testnode.StartProcess(t, t.TempDir(), "--etcd-endpoints", c.etcdAddr, "--node-id", id, "--zone", zone)
	}
	testnode.Eventually(t, 10*time.Second, "every node registered", func() bool {
		nodes, err := cluster.Nodes(context.Background(), c.cli, "/partita/")
		return err == nil && len(nodes) == len(zones)
	})
	return c
}

// spreadOver fails the test unless every partition of states holds its
// replicas in want zones.
func spreadOver(t *testing.T, states []cluster.PartitionState, zones map[string]string, want int) {
	t.Helper()
	for _, st := range states {
		in := map[string]bool{}
		for _, n := range holders(st) {
			in[zones[n]] = true
		}
		if len(in) != want {
			t.Fatalf("partition %d on %v: zones %v, want %d", st.Partition, holders(st), in, want)
		}
	}
}

// Four nodes in three zones (n1 and n2 in a, n3 in b, n4 in c): raising a
// topic's replica count from one to two puts each partition's second
// replica in another zone than its first, though a node of the same zone
// holds fewer; draining n4, the one node of zone c, hands its leaderships
// over and moves each of its replicas into the zone its partition lacks,
// so every partition keeps two zones.
func TestZonesKeptByReplicaCountAndDrain(t *testing.T) {
	zones := map[string]string{"n1": "a", "n2": "a", "n3": "b", "n4": "c"}
	c := startZoned(t, zones)
	c.createWithChannel("zd", 4, 1)
	// A partition never written to has no record to probe a new replica
	// with: each gets one.
	// Each is forwarded to its leader, which n1 may not yet know for live
	// right after the topic was made (its view follows etcd's watch): a
	// refusal then is retried, as a client would.
	for p := range 4 {
		testnode.Eventually(t, 15*time.Second, fmt.Sprintf("a publish to partition %d", p), func() bool {
			code, _ := testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/pub?topic=zd&partition=%d", p), "m")
			return code == 200
		})
	}
	if code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/topic/meta/update?topic=zd&replicator=2", ""); code != 200 {
		t.Fatalf("to two replicas: %d %s", code, body)
	}
	spreadOver(t, c.settled("zd", 2), zones, 2)
	if code, body := testnode.Post(t, c.nodes["n3"].HTTP, "/cluster/node/remove?remove_node=n4", ""); code != 200 {
		t.Fatalf("drain: %d %s", code, body)
	}
	var states []cluster.PartitionState
	testnode.Eventually(t, 60*time.Second, "n4 drained", func() bool {
		states = c.settled("zd", 2)
		return !slices.ContainsFunc(states, func(st cluster.PartitionState) bool { return slices.Contains(holders(st), "n4") })
	})
	spreadOver(t, states, zones, 2)
}
