// Package cluster tests Partita as it runs in production: several node
// processes of the built binary on one etcd, under kill -9, SIGSTOP,
// network partitions, rolling restarts, etcd outages and load. Tests of the
// binary alone (its flags, signals and limits) stay in cmd/node; both start
// processes through internal/testnode.
//
// Timing assertions hold only without the race detector (raceEnabled); CI
// runs this package with -race, as part of the product module.
package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// testCluster is several node processes sharing one etcd, which the test
// runs embedded, as an external etcd would be.
type testCluster struct {
	t        *testing.T
	etcd     *cluster.Embedded
	etcdAddr string
	cli      *clientv3.Client
	assign   *cluster.Assignments
	nodes    map[string]*testnode.Process
}

func startCluster(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	e, clientAddr := testnode.StartEtcd(t) // stops after the nodes
	c := startNodes(t, clientAddr, e.Client(), n, extra...)
	c.etcd = e
	return c
}

// startNodes starts n node processes, n1 to n<n>, on the etcd at endpoint.
func startNodes(t *testing.T, endpoint string, cli *clientv3.Client, n int, extra ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, etcdAddr: endpoint, cli: cli, assign: cluster.NewAssignments(cli, "/partita/"), nodes: map[string]*testnode.Process{}}
	for i := 1; i <= n; i++ {
		id := "n" + strconv.Itoa(i)
		args := append([]string{"--etcd-endpoints", endpoint, "--node-id", id}, extra...)
		c.nodes[id] = testnode.StartProcess(t, t.TempDir(), args...)
	}
	return c
}

// state reads a partition's replication state.
func (c *testCluster) state(topic string, p int32) cluster.PartitionState {
	c.t.Helper()
	st, ok, err := c.assign.Get(context.Background(), topic, p)
	if err != nil || !ok {
		c.t.Fatalf("partition state of %s/%d: %v %v", topic, p, ok, err)
	}
	return st
}

// createTopic makes a replicated topic through node 1's HTTP API.
func (c *testCluster) createTopic(name string, replicas int) cluster.PartitionState {
	c.t.Helper()
	code, body := testnode.Post(c.t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=%s&partition_num=1&replicator=%d", name, replicas), "")
	if code != 200 {
		c.t.Fatalf("creating %s: %d %s", name, code, body)
	}
	return c.state(name, 0)
}

func (c *testCluster) followers(st cluster.PartitionState) []string {
	var out []string
	for _, n := range st.ISR {
		if n != st.Leader {
			out = append(out, n)
		}
	}
	return out
}

// restart starts node id again on its data path, after it stopped.
func (c *testCluster) restart(id string) {
	c.t.Helper()
	c.nodes[id] = testnode.StartProcess(c.t, c.nodes[id].DataPath, "--etcd-endpoints", c.etcdAddr, "--node-id", id)
}

// lookups is every node's HTTP address, for consumers that use /lookup.
func (c *testCluster) lookups() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.HTTP)
	}
	return out
}

// publishNumbered publishes prefix0 .. prefix<n-1> through addr and returns
// them, each acknowledged.
func publishNumbered(t *testing.T, addr, topic, prefix string, n int) map[string]bool {
	t.Helper()
	p := producer(t, addr)
	defer p.Stop()
	acked := map[string]bool{}
	for i := range n {
		body := fmt.Sprintf("%s%03d", prefix, i)
		if err := p.Publish(topic, []byte(body)); err != nil {
			t.Fatal(err)
		}
		acked[body] = true
	}
	return acked
}

func (c *testCluster) commitLog(node, topic string) string {
	return filepath.Join(c.nodes[node].DataPath, "topics", topic, "0", "commit.log")
}
