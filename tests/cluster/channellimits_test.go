package cluster

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// channelField reads one field of a channel's entry in a node's /stats
// for the partition it leads; nil when the node leads none of the topic.
func channelField(t *testing.T, hostport, topic, channel, field string) json.RawMessage {
	t.Helper()
	return partitionField(t, hostport, topic, -1, channel, field)
}

// partitionField is channelField for partition p, any when p is -1.
func partitionField(t *testing.T, hostport, topic string, p int, channel, field string) json.RawMessage {
	t.Helper()
	for _, tp := range testnode.Stats(t, hostport, topic) {
		for _, ch := range tp.Channels {
			if tp.IsLeader && (p < 0 || tp.Partition == fmt.Sprint(p)) && ch.Name == channel {
				return ch.Fields[field]
			}
		}
	}
	return nil
}

// postThrough makes an admin call through a node once the channel's
// creation has reached it (404 until then).
func postThrough(t *testing.T, hostport, pathAndQuery string) {
	t.Helper()
	testnode.Eventually(t, 20*time.Second, pathAndQuery+" through "+hostport, func() bool {
		code, body := testnode.Post(t, hostport, pathAndQuery, "")
		if code != 200 && code != 404 {
			t.Fatalf("%s: %d %s", pathAndQuery, code, body)
		}
		return code == 200
	})
}

// leaderAfter waits for a leader of the topic's partition 0 other than old.
func (c *testCluster) leaderAfter(topic, old string) string {
	c.t.Helper()
	var next string
	testnode.Eventually(c.t, 20*time.Second, "a new leader", func() bool {
		next = c.state(topic, 0).Leader
		return next != old && next != ""
	})
	return next
}

// limitedDelivery publishes n messages of 1 KB through node and consumes
// them there, and returns how long the last took to arrive after the
// first.
func (c *testCluster) limitedDelivery(node, topic string, n int) time.Duration {
	c.t.Helper()
	body := strings.Repeat("x", 1024)
	for range n {
		testnode.Eventually(c.t, 20*time.Second, "a publish through "+node, func() bool {
			code, _ := testnode.Post(c.t, c.nodes[node].HTTP, "/pub?topic="+topic, body)
			return code == 200
		})
	}
	r := dialRaw(c.t, c.nodes[node].TCP)
	r.send(fmt.Sprintf("SUB %s ch", topic))
	if a := r.answer(); a != "OK" {
		c.t.Fatalf("SUB: %s", a)
	}
	r.send(fmt.Sprintf("RDY %d", 2*n))
	var first time.Time
	for i := range n {
		m := r.message()
		if i == 0 {
			first = time.Now()
		}
		r.fin(m)
	}
	return time.Since(first)
}

// youzan's /channel/ratelimit: a channel limited to 1 KB a second sends a
// burst of four 1 KB messages and then one a second, on the leader that
// takes over after a kill -9 too, since the limit is in the cluster's
// metadata.
func TestChannelRateLimitHoldsThroughAFailover(t *testing.T) {
	c := startCluster(t, 3)
	c.createWithChannel("limited", 1, 3)
	st := c.state("limited", 0)
	other := c.followers(st)[0]
	postThrough(t, c.nodes[other].HTTP, "/channel/ratelimit?topic=limited&channel=ch&ratekilobytes=1")
	testnode.Eventually(t, 20*time.Second, "the limit on the leader's /stats", func() bool {
		return string(channelField(t, c.nodes[st.Leader].HTTP, "limited", "ch", "rate_limit_kb")) == "1"
	})
	// Six 1 KB messages: four at once, the fifth a second later, the
	// sixth a second after that.
	if took := c.limitedDelivery(st.Leader, "limited", 6); took < 1500*time.Millisecond {
		t.Fatalf("six 1 KB messages at 1 KB a second took %v, want about 2s", took)
	}
	if got := string(channelField(t, c.nodes[st.Leader].HTTP, "limited", "ch", "rate_limited_count")); got == "0" {
		t.Fatalf("rate_limited_count %s after a wait", got)
	}

	c.nodes[st.Leader].Kill(t)
	next := c.leaderAfter("limited", st.Leader)
	// etcd names the new leader a moment before the node has taken the
	// partition over; until then its /stats has no leader's entry.
	testnode.Eventually(t, 20*time.Second, "the new leader's channel entry", func() bool {
		got := string(channelField(t, c.nodes[next].HTTP, "limited", "ch", "rate_limit_kb"))
		if got != "" && got != "1" {
			t.Fatalf("rate_limit_kb %s on the new leader, want 1", got)
		}
		return got == "1"
	})
	if took := c.limitedDelivery(next, "limited", 6); took < 1500*time.Millisecond {
		t.Fatalf("on the new leader, six 1 KB messages took %v, want about 2s", took)
	}
}

// cappedConsumer subscribes to the topic's channel ch through node as
// client_id with RDY 5, and waits for it to hold want messages in flight
// with the rest of the channel's five waiting.
func (c *testCluster) cappedConsumer(node, topic, clientID string, want int64) {
	c.t.Helper()
	r := dialRaw(c.t, c.nodes[node].TCP)
	r.sendBody("IDENTIFY", []byte(`{"client_id":"`+clientID+`"}`))
	if a := r.answer(); a != "OK" {
		c.t.Fatalf("IDENTIFY: %s", a)
	}
	r.send("SUB " + topic + " ch")
	if a := r.answer(); a != "OK" {
		c.t.Fatalf("SUB: %s", a)
	}
	r.send("RDY 5")
	hostport := c.nodes[node].HTTP
	testnode.Eventually(c.t, 20*time.Second, fmt.Sprintf("%s holding %d of 5", clientID, want), func() bool {
		var clients []struct {
			ClientID string `json:"client_id"`
			InFlight int64  `json:"in_flight_count"`
			Limited  *int64 `json:"limited_rdy"`
		}
		if err := json.Unmarshal(channelField(c.t, hostport, topic, "ch", "clients"), &clients); err != nil {
			return false
		}
		return len(clients) == 1 && clients[0].ClientID == clientID && clients[0].InFlight == want &&
			clients[0].Limited != nil && *clients[0].Limited == want &&
			channelDepth(c.t, hostport, topic, "ch") == 5-want
	})
}

// youzan's /channel/setclientlimit: a consumer whose client ID starts
// with the prefix holds at most ready messages in flight whatever its RDY,
// on the leader that takes over after a kill -9 too, since the cap is in
// the cluster's metadata.
func TestChannelClientLimitHoldsThroughAFailover(t *testing.T) {
	c := startCluster(t, 3)
	c.createWithChannel("capped", 1, 3)
	st := c.state("capped", 0)
	postThrough(t, c.nodes[c.followers(st)[0]].HTTP, "/channel/setclientlimit?topic=capped&channel=ch&client_prefix=batch-&ready=2")
	testnode.Eventually(t, 20*time.Second, "the cap on the leader's /stats", func() bool {
		return string(channelField(t, c.nodes[st.Leader].HTTP, "capped", "ch", "client_limits")) == `[{"client_prefix":"batch-","ready":2}]`
	})
	for i := range 5 {
		if code, body := testnode.Post(t, c.nodes[st.Leader].HTTP, "/pub?topic=capped", fmt.Sprint("m", i)); code != 200 {
			t.Fatalf("publish: %d %s", code, body)
		}
	}
	c.cappedConsumer(st.Leader, "capped", "batch-1", 2)

	c.nodes[st.Leader].Kill(t)
	next := c.leaderAfter("capped", st.Leader)
	// Nothing was finished: the new leader holds all five.
	c.cappedConsumer(next, "capped", "batch-2", 2)
}
