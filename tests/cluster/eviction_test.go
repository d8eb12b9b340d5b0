package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testnode"
)

// A killed node's peers find its cluster port refusing connections and end
// its registration at once: with a 30 s lease its partitions are led and
// written again long before the lease would have lapsed, with nothing
// acknowledged lost.
func TestKilledNodeEvictedBeforeItsLeaseLapses(t *testing.T) {
	c := startCluster(t, 3, "--node-lease-ttl", "30s")
	const lease = 30 * time.Second
	testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=evict&partition_num=3&replicator=3", "")
	var parts []part
	for p := range int32(3) {
		parts = append(parts, part{"evict", p})
	}
	acked := map[string]bool{}
	before := func(p part) string { return fmt.Sprintf("before-%d", p.p) }
	testnode.Eventually(t, 20*time.Second, "a first PUB on every partition", func() bool {
		ok, _, _ := pipelinedPub(c.nodes["n1"].TCP, parts, before)
		for p := range ok {
			acked[before(p)] = true
		}
		return len(acked) == len(parts)
	})
	victim := c.state("evict", 0).Leader
	gone := c.registrationGone(victim)
	killed := time.Now()
	c.nodes[victim].Kill(t)
	select {
	case at := <-gone:
		t.Logf("registration of the killed node gone %v after the kill", at.Sub(killed).Round(time.Millisecond))
	case <-time.After(lease / 2):
		t.Fatalf("the killed node is still registered %v after the kill; its lease is %v", lease/2, lease)
	}
	after := func(p part) string { return fmt.Sprintf("after-%d", p.p) }
	pending := parts
	testnode.Eventually(t, lease/2, "every partition writable on its new leader", func() bool {
		ok, _, _ := c.pubToLeaders([]string{"evict"}, victim, pending, after)
		pending = unacked(pending, ok, acked, after)
		return len(pending) == 0
	})
	if left := time.Since(killed); left >= lease {
		t.Fatalf("writable again only %v after the kill, once the lease lapsed", left)
	}
	var lookups []string
	for id, n := range c.nodes {
		if id != victim {
			lookups = append(lookups, n.HTTP)
		}
	}
	deliversAll(t, lookups, "evict", "check", acked)
}

// A live node whose registration lapses, as etcd ends a lease whose
// renewals came too late, registers again and keeps leading every
// partition it led: the controller's replication session to it still
// answers, so the lapse alone is no proof of death
// (--node-lapse-grace). Nothing acknowledged is lost.
func TestLapsedLiveNodeKeepsItsLeaderships(t *testing.T) {
	c := startCluster(t, 3)
	const parts = 6
	testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=lapse&partition_num=%d&replicator=3", parts), "")
	var all []part
	for p := range int32(parts) {
		all = append(all, part{"lapse", p})
	}
	acked := map[string]bool{}
	before := func(p part) string { return fmt.Sprintf("before-%d", p.p) }
	pending := all
	testnode.Eventually(t, 20*time.Second, "a first PUB on every partition", func() bool {
		ok, _, _ := pipelinedPub(c.nodes["n1"].TCP, pending, before)
		pending = unacked(pending, ok, acked, before)
		return len(pending) == 0
	})
	was := map[int32]cluster.PartitionState{}
	for _, p := range all {
		was[p.p] = c.state("lapse", p.p)
	}
	victim := was[0].Leader

	ctx := context.Background()
	revoked, err := cluster.EvictIfGone(ctx, c.cli, "/partita/", victim, func(cluster.NodeInfo) bool { return true })
	if err != nil || !revoked {
		t.Fatalf("ending %s's lease: %v %v", victim, revoked, err)
	}
	testnode.Eventually(t, 20*time.Second, victim+" registered again", func() bool {
		nodes, err := cluster.Nodes(ctx, c.cli, "/partita/")
		return err == nil && slices.ContainsFunc(nodes, func(n cluster.NodeInfo) bool { return n.ID == victim })
	})

	// A round of PUBs through every partition's leader after the lapse.
	after := func(p part) string { return fmt.Sprintf("after-%d", p.p) }
	pending = all
	testnode.Eventually(t, 20*time.Second, "a PUB on every partition after the lapse", func() bool {
		ok, _, _ := c.pubToLeaders([]string{"lapse"}, "", pending, after)
		pending = unacked(pending, ok, acked, after)
		return len(pending) == 0
	})
	for _, p := range all {
		st := c.state("lapse", p.p)
		if st.Leader != was[p.p].Leader || st.EpochForWrite != was[p.p].EpochForWrite {
			t.Errorf("partition %d: leader %s at epoch %d before the lapse, %s at epoch %d after", p.p,
				was[p.p].Leader, was[p.p].EpochForWrite, st.Leader, st.EpochForWrite)
		}
	}
	spared := 0
	for id, n := range c.nodes {
		spared += logLines(t, id, n, 0, func(line string) bool { return strings.Contains(line, "keep their leader") })
	}
	if spared == 0 {
		t.Errorf("no controller said it spared %s's partitions", victim)
	}
	var lookups []string
	for _, n := range c.nodes {
		lookups = append(lookups, n.HTTP)
	}
	deliversAll(t, lookups, "lapse", "check", acked)
}
