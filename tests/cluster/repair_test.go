package cluster

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// A replica whose node is gone for --replica-repair-after is re-created on
// another live node, which catches up and joins the ISR: the partition is
// back to its configured replica count, the new replica's commit log equals
// the leader's, and the node that comes back later drops its stale copy.
func TestLostReplicaRepairedOnAnotherNode(t *testing.T) {
	c := startCluster(t, 4, "--replica-repair-after", "2s")
	st := c.createTopic("repair", 3)
	leader := c.nodes[st.Leader]
	p := producer(t, leader.TCP)
	for i := 0; i < 50; i++ {
		if err := p.Publish("repair", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	lost := c.followers(st)[0]
	lostDir := c.nodes[lost].DataPath
	c.nodes[lost].Kill(t)
	spare := ""
	for id := range c.nodes {
		if id != st.Leader && !slices.Contains(st.ISR, id) {
			spare = id
		}
	}
	i := 50
	testnode.Eventually(t, 30*time.Second, "the partition back to three in-sync replicas, on "+spare, func() bool {
		p.Publish("repair", []byte(fmt.Sprint(i))) // the shrink needs a write; errors are the failover's
		i++
		now := c.state("repair", 0)
		return len(now.ISR) == 3 && slices.Contains(now.ISR, spare) && !slices.Contains(now.ISR, lost) && !slices.Contains(now.Catchup, lost)
	})
	for ; i < 80; i++ {
		if err := p.Publish("repair", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	testnode.Eventually(t, 10*time.Second, "the new replica's commit log to equal the leader's", func() bool {
		a, errA := os.ReadFile(c.commitLog(st.Leader, "repair"))
		b, errB := os.ReadFile(c.commitLog(spare, "repair"))
		return errA == nil && errB == nil && len(a) > 0 && bytes.Equal(a, b)
	})

	c.nodes[lost] = testnode.StartProcess(t, lostDir, "--etcd-endpoints", c.etcdAddr, "--node-id", lost, "--replica-repair-after", "2s")
	testnode.Eventually(t, 10*time.Second, "the returning node to drop its stale copy", func() bool {
		_, err := os.Stat(c.commitLog(lost, "repair"))
		return os.IsNotExist(err)
	})
}
