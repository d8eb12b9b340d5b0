package cluster

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// A leader stopped with SIGTERM while pipelined producers on the two other
// nodes publish to its partition first has the controller move the
// leadership to a follower, drained like any leader move, and only then
// stops: not one publish fails, where a stop that left the partition to
// failover fails the writes in flight and those forwarded meanwhile. Every
// acknowledged publish is delivered.
func TestStoppingLeaderHandsItsLeadershipOffFirst(t *testing.T) {
	c := startCluster(t, 3)
	const name = "stopping"
	st := c.createTopic(name, 3)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/channel/create?topic="+name+"&channel=check", ""); code != 200 {
		t.Fatalf("creating the channel: %d %s", code, body)
	}
	testnode.Eventually(t, 30*time.Second, "every replica in sync", func() bool {
		st = c.state(name, 0)
		return len(st.ISR) == 3
	})
	// The controller, whose metrics tell the hand-off apart from a
	// failover, must outlive the stop.
	ctrl := clusterStats(t, c.nodes["n1"].HTTP).Controller
	if st.Leader == ctrl {
		to := c.followers(st)[0]
		q := "/topic/partition/move?topic=" + name + "&partition=0&move_leader=true&move_from=" + st.Leader + "&move_to=" + to
		if code, body := testnode.Post(t, c.nodes[to].HTTP, q, ""); code != 200 {
			t.Fatalf("moving the leadership off the controller: %d %s", code, body)
		}
		testnode.Eventually(t, 10*time.Second, "the move to "+to, func() bool {
			st = c.state(name, 0)
			return st.Leader == to && len(st.ISR) == 3
		})
	}
	leader, producers := st.Leader, c.followers(st)
	leavingMoves := func() float64 {
		return scrapeSeries(t, c.nodes[ctrl].HTTP, "partita_controller_leader_moves_total", `reason="leaving"`)
	}
	finish := floodEach(c, producers, name, "stopping-")
	admitted := func() float64 {
		var n float64
		for _, id := range producers {
			n += scrapeSums(t, c.nodes[id].HTTP, []string{"partita_publish_admitted_messages_total"})["partita_publish_admitted_messages_total"]
		}
		return n
	}
	progress := func(what string) {
		from := admitted()
		testnode.Eventually(t, 30*time.Second, what, func() bool { return admitted() >= from+2000 })
	}
	progress("publishes before the stop")
	stopped := make(chan struct{})
	sawLeaving := make(chan bool, 1)
	go func() { sawLeaving <- showsLeaving(c.nodes[producers[0]].HTTP, c.nodes[leader].TCP, stopped) }()
	took := c.nodes[leader].Terminate(t, 30*time.Second)
	close(stopped)
	if !<-sawLeaving {
		t.Errorf("%s's /nodes never showed %s \"leaving\" while it stopped", producers[0], leader)
	}
	after := c.state(name, 0)
	t.Logf("%s stopped in %v; %s leads in epoch %d (was %d)", leader, took.Round(time.Millisecond), after.Leader, after.EpochForWrite, st.EpochForWrite)
	if n := leavingMoves(); n != 1 || after.Leader == leader || after.EpochForWrite != st.EpochForWrite+1 {
		t.Errorf("the controller moved %v leaderships off the stopping %s, and %s leads in epoch %d; want 1, and a follower in epoch %d", n, leader, after.Leader, after.EpochForWrite, st.EpochForWrite+1)
	}
	progress("publishes after the stop")
	load := finish()
	t.Logf("%d PUBs acknowledged, %d refused with E_PUB_TOO_MUCH_WAITING, %d failed otherwise (%v, first: %s), %d unanswered",
		len(load.Acked), load.Refused, load.Failed, load.Failures, load.FirstFailure, load.Unanswered)
	if load.Failed > 0 || load.Refused > 0 || load.Unanswered > 0 {
		t.Errorf("%d PUBs failed (%v, first: %s), %d were refused and %d unanswered; want every one acknowledged", load.Failed, load.Failures, load.FirstFailure, load.Refused, load.Unanswered)
	}
	acked := map[string]bool{}
	for _, b := range load.Acked {
		acked[b] = true
	}
	deliversAllInFlight(t, c.lookups(), name, "check", 2000, acked)
}

// showsLeaving polls hostport's /nodes until stopped closes, and reports
// whether the node at tcp was ever listed "leaving".
func showsLeaving(hostport, tcp string, stopped <-chan struct{}) bool {
	for {
		var doc struct {
			Producers []struct {
				RemoteAddress string `json:"remote_address"`
				Leaving       bool   `json:"leaving"`
			} `json:"producers"`
		}
		if resp, err := http.Get("http://" + hostport + "/nodes"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&doc)
			resp.Body.Close()
			for _, p := range doc.Producers {
				if err == nil && p.RemoteAddress == tcp && p.Leaving {
					return true
				}
			}
		}
		select {
		case <-stopped:
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// scrapeSeries sums the samples of family on hostport whose labels include
// label (name="value").
func scrapeSeries(t *testing.T, hostport, family, label string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(scrapeMetrics(t, hostport), "\n") {
		labels, ok := strings.CutPrefix(line, family+"{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(labels, "} ")
		if !slices.Contains(strings.Split(labels, ","), label) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			sum += v
		}
	}
	return sum
}
