package main

import (
	"bytes"
	"context"
	"fmt"
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
	dir := c.nodes[victim].DataPath
	c.nodes[victim].Terminate(t, 10*time.Second)
	for i := 30; i < 40; i++ { // the ISR shrinks without it; these it lacks
		if err := p.Publish("restart", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	epoch := c.state("restart", 0).EpochForWrite
	c.nodes[victim] = testnode.StartProcess(t, dir, "--etcd-endpoints", c.etcdAddr, "--node-id", victim)
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
	c.nodes[victim] = testnode.StartProcess(t, dir, "--etcd-endpoints", c.etcdAddr, "--node-id", victim)
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
