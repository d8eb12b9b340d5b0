package cluster

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// 24. An ISR follower restarted while the ISR has more members than a bare
// majority leaves the ISR and rejoins through catch-up (the join increments
// EpochForWrite), ending with the leader's commit log; it does so on an idle
// partition too. A node whose local topics are all unknown to etcd deletes
// nothing.
func TestBehaviour24RestartedFollowerRejoinsThroughCatchup(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("restart", 3)
	leader := c.nodes[st.Leader]
	p := producer(t, leader.TCP)
	for i := 0; i < 30; i++ {
		if err := p.Publish("restart", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	victim := c.followers(st)[0]
	c.nodes[victim].Terminate(t, 10*time.Second)
	for i := 30; i < 40; i++ { // the ISR shrinks without it; these it lacks
		if err := p.Publish("restart", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	epoch := c.state("restart", 0).EpochForWrite
	c.restart(victim)
	var now cluster.PartitionState
	testnode.Eventually(t, 20*time.Second, victim+" back in the ISR through a join", func() bool {
		now = c.state("restart", 0)
		return slices.Contains(now.ISR, victim) && now.EpochForWrite > epoch
	})
	testnode.Eventually(t, 10*time.Second, victim+"'s commit log to equal the leader's", func() bool {
		a, errA := os.ReadFile(c.commitLog(st.Leader, "restart"))
		b, errB := os.ReadFile(c.commitLog(victim, "restart"))
		return errA == nil && errB == nil && bytes.Equal(a, b)
	})

	// Restarted straight away, with no write in between, it still leaves
	// and rejoins.
	epoch = now.EpochForWrite
	c.nodes[victim].Terminate(t, 10*time.Second)
	c.restart(victim)
	testnode.Eventually(t, 20*time.Second, victim+" back in the ISR after an idle restart", func() bool {
		now = c.state("restart", 0)
		return slices.Contains(now.ISR, victim) && now.EpochForWrite > epoch
	})
}

// A node started on an etcd that knows none of its local topics (a new or
// wrong etcd) serves none of them and deletes none of their files.
func TestUnknownLocalTopicsAreKept(t *testing.T) {
	c := startCluster(t, 1)
	n1 := c.nodes["n1"]
	c.createTopic("kept", 1)
	if err := producer(t, n1.TCP).Publish("kept", []byte("x")); err != nil {
		t.Fatal(err)
	}
	dir := n1.DataPath
	n1.Terminate(t, 10*time.Second)
	commitLog := filepath.Join(dir, "topics", "kept", "0", "commit.log")
	before, err := os.ReadFile(commitLog)
	if err != nil || len(before) == 0 {
		t.Fatalf("commit log before: %d bytes, %v", len(before), err)
	}

	fresh := startCluster(t, 0)
	n1 = testnode.StartProcess(t, dir, "--etcd-endpoints", fresh.etcdAddr, "--node-id", "n1")
	if got := statsMessages(t, n1.HTTP, "kept"); got != 0 {
		t.Fatalf("a topic unknown to etcd is served with %d messages", got)
	}
	if states, err := fresh.assign.List(context.Background(), "kept"); err != nil || len(states) > 0 {
		t.Fatalf("the node placed its unknown topic in the new etcd: %v %v", states, err)
	}
	n1.Terminate(t, 10*time.Second)
	after, err := os.ReadFile(commitLog)
	if err != nil || !bytes.Equal(after, before) {
		t.Fatalf("commit log after a start on an etcd without the topic: %d bytes (was %d), %v", len(after), len(before), err)
	}
}

// docs/replication.md#restart-leader-resigns: a leader that restarts while
// its partition has followers resigns, and the controller elects the ISR
// member with the most data. The whole cluster is killed and the leader's
// log loses its tail, as a power loss takes what was not yet fsynced
// (--sync-every). The leader comes back first, alone: it must not be elected
// on what it kept, and once the others are back, the one with every
// acknowledged message leads and nothing acknowledged is lost.
func TestRestartedLeaderResignsToTheMemberWithMostData(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("resign", 3)
	old := st.Leader
	const published = 50
	acked := publishNumbered(t, c.nodes[old].TCP, "resign", "m-", published)
	for _, n := range c.nodes {
		n.Kill(t)
	}
	lost := tearLogTail(t, filepath.Dir(c.commitLog(old, "resign")), published, 5)

	c.restart(old)
	testnode.Eventually(t, 20*time.Second, old+" to resign after its restart", func() bool {
		return c.state("resign", 0).Leader == ""
	})
	for _, id := range c.followers(st) {
		c.restart(id)
	}
	var now cluster.PartitionState
	testnode.Eventually(t, 30*time.Second, "a leader elected among the restarted replicas", func() bool {
		now = c.state("resign", 0)
		return now.Leader != ""
	})
	if now.Leader == old || now.EpochForWrite <= st.EpochForWrite {
		t.Fatalf("after the restart: %+v; want a leader other than %s, which lost %d bytes, at an epoch past %d", now, old, lost, st.EpochForWrite)
	}
	deliversAll(t, c.lookups(), "resign", "ch", acked)
	testnode.Eventually(t, 20*time.Second, "every commit log to equal the new leader's", func() bool {
		want, err := os.ReadFile(c.commitLog(now.Leader, "resign"))
		if err != nil {
			return false
		}
		for id := range c.nodes {
			got, err := os.ReadFile(c.commitLog(id, "resign"))
			if err != nil || !bytes.Equal(got, want) {
				return false
			}
		}
		return true
	})
}

// tearLogTail cuts the partition's one segment, which holds n messages of
// one size, in the middle of the lose-th message from its end, as a
// power loss leaves a log whose tail was not fsynced. It returns the bytes
// cut.
func tearLogTail(t *testing.T, partitionDir string, n, lose int) int64 {
	t.Helper()
	segments, err := filepath.Glob(filepath.Join(partitionDir, "0*.log"))
	if err != nil || len(segments) != 1 {
		t.Fatalf("segments in %s: %v %v", partitionDir, segments, err)
	}
	info, err := os.Stat(segments[0])
	if err != nil {
		t.Fatal(err)
	}
	each := info.Size() / int64(n)
	if each*int64(n) != info.Size() {
		t.Fatalf("segment of %d bytes does not hold %d messages of one size", info.Size(), n)
	}
	cut := int64(lose)*each - each/2
	if err := os.Truncate(segments[0], info.Size()-cut); err != nil {
		t.Fatal(err)
	}
	return cut
}

// Stopping every node, one after another, and starting them all again (a
// planned outage, or a power cut) loses nothing acknowledged: the
// partition gets a leader and its full ISR back, and takes writes.
func TestWholeClusterStoppedAndStarted(t *testing.T) {
	t.Run("SIGTERM", func(t *testing.T) {
		wholeClusterRestart(t, func(p *testnode.Process) { p.Terminate(t, 30*time.Second) }, []string{"n1", "n2", "n3"})
	})
	t.Run("kill -9, started in reverse order", func(t *testing.T) {
		wholeClusterRestart(t, func(p *testnode.Process) { p.Kill(t) }, []string{"n3", "n2", "n1"})
	})
}

func wholeClusterRestart(t *testing.T, stop func(*testnode.Process), startOrder []string) {
	c := startCluster(t, 3)
	st := c.createTopic("outage", 3)
	acked := publishNumbered(t, c.nodes[st.Leader].TCP, "outage", "before-", 50)
	for _, id := range []string{"n1", "n2", "n3"} {
		stop(c.nodes[id])
	}
	for _, id := range startOrder {
		c.restart(id)
	}
	var now cluster.PartitionState
	testnode.Eventually(t, 30*time.Second, "a leader and the full ISR back", func() bool {
		now = c.state("outage", 0)
		return now.Leader != "" && len(now.ISR) == 3
	})
	maps.Copy(acked, publishNumbered(t, c.nodes[now.Leader].TCP, "outage", "after-", 1))
	deliversAll(t, c.lookups(), "outage", "ch", acked)
}
