package protocol_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// createPartitioned makes a topic of three partitions and puts perPartition
// messages on each, with bodies "<partition>-<i>".
func createPartitioned(t *testing.T, n *testnode.Node, name string, perPartition int) {
	t.Helper()
	if code, body := n.Post(t, "/topic/create?topic="+name+"&partition_num=3", ""); code != 200 {
		t.Fatalf("/topic/create: %d %s", code, body)
	}
	p := dial(t, n)
	for part := range 3 {
		for i := range perPartition {
			p.send(fmt.Sprintf("PUB %s %d", name, part), fmt.Appendf(nil, "%d-%d", part, i))
			p.response(protocol.ResponseOK)
		}
	}
}

func TestSubReceivesEveryPartition(t *testing.T) {
	n := startNode(t)
	createPartitioned(t, n, "parts", 10)
	c := consumer(t, n, "parts", "ch", 100)
	seen := map[string]bool{}
	partitions := map[int32]int{}
	for range 30 {
		m := c.message()
		part := topic.PartitionOf(m.ID)
		if !strings.HasPrefix(string(m.Body), fmt.Sprint(part, "-")) {
			t.Fatalf("message %q has an ID of partition %d", m.Body, part)
		}
		seen[string(m.Body)] = true
		partitions[part]++
		c.send("FIN "+idText(m.ID), nil)
	}
	if len(seen) != 30 {
		t.Fatalf("got %d distinct messages of 30", len(seen))
	}
	for part := range int32(3) {
		if partitions[part] != 10 {
			t.Fatalf("messages per partition %v, want 10 each", partitions)
		}
	}
	waitStats(t, n, "parts", "ch", "all FINished", func(s chanStats) bool { return s.InFlight == 0 && s.Depth == 0 })
}

func TestSubOnePartition(t *testing.T) {
	n := startNode(t)
	createPartitioned(t, n, "onepart", 10)
	c := dial(t, n)
	c.identify(map[string]any{})
	c.send("SUB onepart ch 1", nil)
	c.response(protocol.ResponseOK)
	c.rdy(100)
	for range 10 {
		m := c.message()
		if part := topic.PartitionOf(m.ID); part != 1 || !strings.HasPrefix(string(m.Body), "1-") {
			t.Fatalf("got %q from partition %d, want partition 1 only", m.Body, part)
		}
		c.send("FIN "+idText(m.ID), nil)
	}
	waitStats(t, n, "onepart", "ch", "partition 1 drained", func(s chanStats) bool { return s.InFlight == 0 && s.Depth == 20 })
	c.nothingFor(300 * time.Millisecond)
}
