package cluster

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /cluster/upgrade/begin … /done on three nodes. While the
// upgrade is under way the controller's node stops and stays away past
// --replica-repair-after: its leadership fails over, since writes must not
// wait, and the next controller finds the mark in etcd, so its replicas
// are not re-created elsewhere; back, it catches up and rejoins, and the
// leader balance does not hand its leadership back, so nothing moves
// while the nodes are all back. Once the upgrade is done the balance
// gives the leadership back at once.
func TestUpgradeHoldsRepairAndBalance(t *testing.T) {
	flags := []string{"--http-admin-token", testAdminToken, "--leader-balance-interval", "300ms", "--replica-repair-after", "1s"}
	c := startCluster(t, 3, flags...)
	// Two replicas on three nodes, so a repair has a node to go to.
	if code, body := postAdmin(t, c.nodes["n1"].HTTP, "/topic/create?topic=up&partition_num=3&replicator=2"); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	testnode.Eventually(t, 20*time.Second, "a stable cluster", func() bool { return clusterStats(t, c.nodes["n1"].HTTP).Stable })
	states := func() []cluster.PartitionState {
		out := make([]cluster.PartitionState, 3)
		for p := range int32(3) {
			out[p] = c.state("up", p)
		}
		return out
	}
	// The controller's node x is restarted; led is a partition it leads,
	// its preferred replica.
	x := clusterStats(t, c.nodes["n1"].HTTP).Controller
	var led int32 = -1
	for _, st := range states() {
		if st.Leader == x && st.Preferred == x {
			led = st.Partition
		}
	}
	if led < 0 {
		t.Fatalf("no partition led by its preferred replica %s: %+v", x, states())
	}
	var y string // a node that stays
	for _, id := range []string{"n1", "n2", "n3"} {
		if id != x {
			y = id
		}
	}
	placed := func(sts []cluster.PartitionState) string {
		var out []string
		for _, st := range sts {
			out = append(out, fmt.Sprint(st.Partition, slices.Sorted(slices.Values(slices.Concat(st.ISR, st.Catchup)))))
		}
		return strings.Join(out, " ")
	}
	before := placed(states())

	if code, body := testnode.Post(t, c.nodes[y].HTTP, "/cluster/upgrade/begin", ""); code != 401 {
		t.Fatalf("begin without the token: %d %s, want 401", code, body)
	}
	if code, body := postAdmin(t, c.nodes[y].HTTP, "/cluster/upgrade/begin"); code != 200 || !strings.Contains(body, `"upgrading":true`) {
		t.Fatalf("begin: %d %s", code, body)
	}
	if doc := clusterStats(t, c.nodes[x].HTTP); !doc.Upgrading || doc.Stable {
		t.Fatalf("/cluster/stats during the upgrade: %+v", doc)
	}

	dataPath := c.nodes[x].DataPath
	c.nodes[x].Terminate(t, 20*time.Second)
	testnode.Eventually(t, 20*time.Second, x+"'s leadership failed over", func() bool {
		l := c.state("up", led).Leader
		return l != "" && l != x
	})
	if ctrl := clusterStats(t, c.nodes[y].HTTP).Controller; ctrl == x {
		t.Fatalf("%s still the controller once stopped", x)
	}
	// Away for more than --replica-repair-after, several checks of the
	// controller: nothing is re-created elsewhere.
	holdsFor := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
			if !cond() {
				t.Fatalf("during the upgrade: %s", what)
			}
		}
	}
	holdsFor(2*time.Second, "a replica of "+x+" repaired on another node", func() bool { return placed(states()) == before })

	c.nodes[x] = testnode.StartProcess(t, dataPath, append([]string{"--etcd-endpoints", c.etcdAddr, "--node-id", x}, flags...)...)
	testnode.Eventually(t, 30*time.Second, x+" back in every ISR", func() bool {
		for _, st := range states() {
			if slices.Contains(st.Catchup, x) {
				return false
			}
		}
		return clusterStats(t, c.nodes[y].HTTP).UnderReplicated == 0
	})
	settled := states()
	holdsFor(2*time.Second, "leadership or ISR changed with every node back", func() bool {
		now := states()
		for i := range now {
			if now[i].Leader != settled[i].Leader || now[i].EpochForWrite != settled[i].EpochForWrite || !slices.Equal(now[i].ISR, settled[i].ISR) {
				return false
			}
		}
		return true
	})
	if l := c.state("up", led).Leader; l == x {
		t.Fatalf("leadership balanced back to %s during the upgrade", x)
	}

	if code, body := postAdmin(t, c.nodes[x].HTTP, "/cluster/upgrade/done"); code != 200 || !strings.Contains(body, `"upgrading":false`) {
		t.Fatalf("done: %d %s", code, body)
	}
	testnode.Eventually(t, 10*time.Second, "leadership back to "+x+" once the upgrade is done", func() bool {
		return c.state("up", led).Leader == x
	})
	testnode.Eventually(t, 10*time.Second, "a stable cluster after the upgrade", func() bool {
		doc := clusterStats(t, c.nodes["n2"].HTTP)
		return doc.Stable && !doc.Upgrading
	})
	if after := placed(states()); after != before {
		t.Fatalf("replicas %s after the upgrade, want them where they were: %s", after, before)
	}
}
