package cluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

func TestTmpScrapeLease(t *testing.T) {
	if os.Getenv("TMP_SCRAPE") == "" {
		t.Skip()
	}
	c := startCluster(t, 3, "--log-level", "info")
	var all []part
	var topics []string
	for i := 0; i < 10; i++ {
		name := fmt.Sprintf("wide%d", i)
		if code, body := testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=%s&partition_num=1000&replicator=3", name), ""); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		topics = append(topics, name)
		for p := range 1000 {
			all = append(all, part{name, int32(p)})
		}
	}
	acked := map[string]bool{}
	before := func(p part) string { return fmt.Sprintf("before-%s-%d", p.topic, p.p) }
	pending := all
	for len(pending) > 0 {
		ok, _, _ := pipelinedPub(c.nodes["n1"].TCP, pending, before)
		pending = unacked(pending, ok, acked, before)
	}
	var lookups []string
	for _, n := range c.nodes {
		lookups = append(lookups, n.HTTP)
	}
	consumers := consumeAll(t, lookups, topics, "check", 200)
	defer consumers.stop()
	consumers.await(t, acked, 60*time.Second)
	t.Logf("%s consumers done", time.Now().UTC().Format(time.TimeOnly+".000"))
	for round := 0; round < 4; round++ {
		for _, id := range []string{"n1", "n2", "n3"} {
			t0 := time.Now()
			body := scrapeMetrics(t, c.nodes[id].HTTP)
			t.Logf("%s scrape %s took %v, %d bytes", t0.UTC().Format(time.TimeOnly+".000"), id, time.Since(t0), len(body))
		}
	}
	if mode := os.Getenv("TMP_SCRAPE"); mode == "idle" {
		time.Sleep(10 * time.Second)
	}
	for id, n := range c.nodes {
		logLines(t, id, n, 0, func(line string) bool { return strings.Contains(line, "registration") || strings.Contains(line, "elected controller") })
	}
}
