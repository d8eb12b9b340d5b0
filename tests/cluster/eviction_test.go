package cluster

import (
	"fmt"
	"testing"
	"time"

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
