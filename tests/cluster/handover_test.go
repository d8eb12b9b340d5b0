package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/flood"
	"github.com/partitamq/partita/internal/testnode"
)

// handoverMoves is how many times TestLeaderMovesSendOnWhatTheFormerLeaderNeverWrote
// moves the leadership.
const handoverMoves = 4

// A partition's leadership moves around the three nodes while pipelined
// producers publish to it, one on each node, so that the publishes of
// two of them are forwarded. Before each move the old leader holds its
// writes until none is in flight, so the move fails none; what queued
// behind the hold, and what reaches the old leader after, was never
// written there: it goes on to the new leader, through the node itself or
// through the forwarder, and is acknowledged there. No publish fails, and
// every acknowledged publish is delivered.
func TestLeaderMovesSendOnWhatTheFormerLeaderNeverWrote(t *testing.T) {
	c := startCluster(t, 3)
	const name = "handover"
	st := c.createTopic(name, 3)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/channel/create?topic="+name+"&channel=check", ""); code != 200 {
		t.Fatalf("creating the channel: %d %s", code, body)
	}
	finish := floodEach(c, slices.Sorted(maps.Keys(c.nodes)), name, "handover-")
	admitted := func() float64 {
		var n float64
		for _, node := range c.nodes {
			n += scrapeSums(t, node.HTTP, []string{"partita_publish_admitted_messages_total"})["partita_publish_admitted_messages_total"]
		}
		return n
	}
	progress := func(what string) {
		from := admitted()
		testnode.Eventually(t, 30*time.Second, what, func() bool { return admitted() >= from+2000 })
	}
	progress("publishes before the first move")
	leader := st.Leader
	for i := range handoverMoves {
		testnode.Eventually(t, 30*time.Second, "every replica in sync", func() bool {
			st = c.state(name, 0)
			return len(st.ISR) == 3
		})
		to := c.followers(st)[i%2]
		q := fmt.Sprintf("/topic/partition/move?topic=%s&partition=0&move_leader=true&move_from=%s&move_to=%s", name, leader, to)
		if code, body := testnode.Post(t, c.nodes[to].HTTP, q, ""); code != 200 {
			t.Fatalf("moving the leadership from %s to %s: %d %s", leader, to, code, body)
		}
		testnode.Eventually(t, 10*time.Second, "the move to "+to, func() bool { return c.state(name, 0).Leader == to })
		t.Logf("moved from %s to %s", leader, to)
		leader = to
		progress(fmt.Sprintf("publishes after move %d", i+1))
	}
	load := finish()
	var sentOn float64
	drains := map[string]float64{}
	for _, node := range c.nodes {
		sentOn += scrapeSums(t, node.HTTP, []string{"partita_publishes_sent_on_total"})["partita_publishes_sent_on_total"]
		for _, line := range strings.Split(scrapeMetrics(t, node.HTTP), "\n") {
			if rest, ok := strings.CutPrefix(line, "partita_controller_leader_move_drains_total{"); ok {
				_, outcome, _ := strings.Cut(rest, `outcome="`)
				outcome, value, _ := strings.Cut(outcome, `"`)
				_, value, _ = strings.Cut(value, " ")
				v, _ := strconv.ParseFloat(value, 64)
				drains[outcome] += v
			}
		}
	}
	// A move the controller found overtaken is drained again.
	if drains["drained"] < handoverMoves || drains["not_drained"] != 0 {
		t.Errorf("the controller drained %v old leaderships before the moves and %v not; want %d or more and 0", drains["drained"], drains["not_drained"], handoverMoves)
	}
	t.Logf("%d PUBs acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING, %d failed otherwise (%v, first: %s), %d unanswered; %v sent on to a next leader",
		len(load.Acked), load.Refused, load.Failed, load.Failures, load.FirstFailure, load.Unanswered, sentOn)
	if load.Failed > 0 || load.Refused > 0 || load.Unanswered > 0 {
		t.Errorf("%d PUBs failed (%v, first: %s), %d were refused and %d unanswered; want every one acknowledged", load.Failed, load.Failures, load.FirstFailure, load.Refused, load.Unanswered)
	}
	if sentOn == 0 {
		t.Errorf("no publish was sent on to a next leader in %d moves under load: the test proves nothing", handoverMoves)
	}
	acked := map[string]bool{}
	for _, b := range load.Acked {
		acked[b] = true
	}
	deliversAllInFlight(t, c.lookups(), name, "check", 2000, acked)
}

// floodEach publishes to topic through each of the nodes ids with
// flood.Publish, 200 PUBs outstanding each, bodies named prefix and the
// node, until the returned finish, which waits for them and returns what
// they saw together.
func floodEach(c *testCluster, ids []string, topic, prefix string) (finish func() flood.Result) {
	var stopped sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	var load flood.Result
	for _, id := range ids {
		stopped.Go(func() {
			r := flood.Publish(c.nodes[id].TCP, []flood.Target{{Topic: topic}}, prefix+id, 200, func() bool {
				select {
				case <-stop:
					return true
				default:
					return false
				}
			})
			mu.Lock()
			load.Add(r)
			mu.Unlock()
		})
	}
	return func() flood.Result {
		close(stop)
		stopped.Wait()
		return load
	}
}
