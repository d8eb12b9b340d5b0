package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /channel/skip: the channel drops its backlog and what is
// published while skipped, on the leader that takes over after a kill -9
// too, since the mark is in the cluster's metadata; /channel/unskip makes
// it deliver what comes after.
func TestChannelSkipHoldsThroughAFailover(t *testing.T) {
	c := startCluster(t, 3)
	c.createWithChannel("skipped", 1, 3)
	st := c.state("skipped", 0)
	pub := func(node string, n int) {
		t.Helper()
		for i := range n {
			testnode.Eventually(t, 20*time.Second, "a publish through "+node, func() bool {
				code, _ := testnode.Post(t, c.nodes[node].HTTP, "/pub?topic=skipped", fmt.Sprint("m", i))
				return code == 200
			})
		}
	}
	depthIs := func(node string, want int64) {
		t.Helper()
		testnode.Eventually(t, 20*time.Second, fmt.Sprintf("depth %d on %s", want, node), func() bool {
			return channelDepth(t, c.nodes[node].HTTP, "skipped", "ch") == want
		})
	}
	pub(st.Leader, 5)
	depthIs(st.Leader, 5)
	other := "n1"
	if other == st.Leader {
		other = "n2"
	}
	// Through another node, once the channel's creation has reached it.
	testnode.Eventually(t, 20*time.Second, "the skip taken through "+other, func() bool {
		code, body := testnode.Post(t, c.nodes[other].HTTP, "/channel/skip?topic=skipped&channel=ch", "")
		if code != 200 && code != 404 {
			t.Fatalf("skip: %d %s", code, body)
		}
		return code == 200
	})
	depthIs(st.Leader, 0)
	pub(st.Leader, 5)
	if code, body := testnode.Get(t, c.nodes[st.Leader].HTTP, "/stats?format=json&topic=skipped"); code != 200 || !strings.Contains(body, `"skipped":true`) {
		t.Fatalf("/stats of the skipped channel: %d %s", code, body)
	}
	depthIs(st.Leader, 0)

	c.nodes[st.Leader].Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("skipped", 0).Leader
		return next != st.Leader && next != ""
	})
	pub(next, 3)
	if code, body := testnode.Get(t, c.nodes[next].HTTP, "/stats?format=json&topic=skipped"); code != 200 || !strings.Contains(body, `"skipped":true`) {
		t.Fatalf("/stats on the new leader: %d %s", code, body)
	}
	depthIs(next, 0)

	if code, body := testnode.Post(t, c.nodes[next].HTTP, "/channel/unskip?topic=skipped&channel=ch", ""); code != 200 {
		t.Fatalf("unskip: %d %s", code, body)
	}
	pub(next, 2)
	depthIs(next, 2)
}
