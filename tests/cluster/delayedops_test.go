package cluster

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /channel/requeuedelayed and /channel/emptydelayed through a
// node that passes each partition's part on to its leader. Requeued, a
// message due within the hours given waits first in line; emptied, the
// deferred messages are confirmed, so after a kill -9 of partition 0's
// leader the new leader holds only the requeued one, deferred again from
// its place in the log: the emptied one does not come back.
func TestChannelEmptyDelayedHoldsThroughAFailover(t *testing.T) {
	c := startCluster(t, 3, "--max-req-timeout", "3h")
	c.createWithChannel("later", 2, 3)
	st0 := c.state("later", 0)
	dpub := func(p int, d time.Duration) {
		t.Helper()
		q := fmt.Sprintf("/pub?topic=later&partition=%d&defer=%d", p, d.Milliseconds())
		testnode.Eventually(t, 20*time.Second, "a deferred publish", func() bool {
			code, _ := testnode.Post(t, c.nodes["n1"].HTTP, q, "later")
			return code == 200
		})
	}
	dpub(0, 2*time.Hour)
	dpub(0, 30*time.Minute) // due within the hour: requeued now
	dpub(1, 2*time.Hour)
	field := func(p int, name string) string {
		t.Helper()
		st := c.state("later", int32(p))
		return string(partitionField(t, c.nodes[st.Leader].HTTP, "later", p, "ch", name))
	}
	testnode.Eventually(t, 20*time.Second, "three deferred on the leaders", func() bool {
		return field(0, "deferred_count") == "2" && field(1, "deferred_count") == "1"
	})

	via := c.nodes["n3"].HTTP
	code, body := testnode.Post(t, via, "/channel/requeuedelayed?topic=later&channel=ch&partition=0&offset=1", "")
	if code != 200 || body != `{"requeued":1}` {
		t.Fatalf("requeuedelayed: %d %s", code, body)
	}
	if field(0, "deferred_count") != "1" || field(0, "depth") != "1" {
		t.Fatalf("after requeuedelayed: deferred %s, depth %s; want the 30-minute one waiting now",
			field(0, "deferred_count"), field(0, "depth"))
	}
	code, body = testnode.Post(t, via, "/channel/emptydelayed?topic=later&channel=ch", "")
	if code != 200 || body != `{"emptied":2}` {
		t.Fatalf("emptydelayed: %d %s", code, body)
	}
	for p := range 2 {
		if field(p, "deferred_count") != "0" || field(p, "deferred_emptied_count") != "1" {
			t.Fatalf("partition %d after emptydelayed: deferred %s, emptied %s", p, field(p, "deferred_count"), field(p, "deferred_emptied_count"))
		}
	}
	// The followers hold the confirmation: the emptied message of
	// partition 0 came first, so its confirmed offset moved past it, and
	// one message (the requeued one) is left unfinished.
	for _, f := range c.followers(st0) {
		testnode.Eventually(t, 20*time.Second, "the confirmation on "+f, func() bool {
			v, _ := testnode.MetricValue(c.nodes[f].HTTP, "partita_channel_lag_messages", `partition="0",topic="later"`)
			return v == "1"
		})
	}

	c.nodes[st0.Leader].Kill(t)
	next := c.leaderAfter("later", st0.Leader)
	// A publish the new leader commits has its channel read on from its
	// confirmed offset.
	q := "/pub?topic=later&partition=0"
	testnode.Eventually(t, 20*time.Second, "a publish to the new leader", func() bool {
		code, _ := testnode.Post(t, c.nodes[next].HTTP, q, "now")
		return code == 200
	})
	var deferred string
	testnode.Eventually(t, 20*time.Second, "the new leader reading past the confirmed offset", func() bool {
		deferred = string(partitionField(t, c.nodes[next].HTTP, "later", 0, "ch", "deferred_count"))
		return string(partitionField(t, c.nodes[next].HTTP, "later", 0, "ch", "depth")) == "1" && deferred != "0"
	})
	if deferred != "1" {
		t.Fatalf("the new leader holds %s deferred, want only the requeued one", deferred)
	}
	if code, body := testnode.Post(t, via, "/channel/emptydelayed?topic=later&channel=ch&partition=x", ""); code != 400 || !strings.Contains(body, "INVALID_PARTITION") {
		t.Fatalf("a bad partition: %d %s", code, body)
	}
}

// youzan's /message/historystats on a three-node cluster: the bytes a
// partition committed this hour, counted by the node holding it and
// answered through a node that does not hold it; the node's list names
// the partitions it holds.
func TestMessageHistoryStatsThroughAnyNode(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("counted", 1)
	holder := c.nodes[st.Leader].HTTP
	other := "n1"
	if other == st.Leader {
		other = "n2"
	}
	var doc struct {
		Hours   []int64 `json:"hourly_pub_size"`
		Current int64   `json:"current_hour_pub_size"`
	}
	read := func() {
		t.Helper()
		code, body := testnode.Get(t, c.nodes[other].HTTP, "/message/historystats?topic=counted&partition=0")
		if code != 200 {
			t.Fatalf("historystats through %s: %d %s", other, code, body)
		}
		if err := json.Unmarshal([]byte(body), &doc); err != nil {
			t.Fatalf("%v in %s", err, body)
		}
	}
	// Counting starts at the holder's first sample of the partition.
	testnode.Eventually(t, 20*time.Second, "the topic known to "+other, func() bool {
		code, _ := testnode.Get(t, c.nodes[other].HTTP, "/message/historystats?topic=counted&partition=0")
		return code == 200
	})
	read()
	before := doc.Current
	testnode.Eventually(t, 20*time.Second, "a publish", func() bool {
		code, _ := testnode.Post(t, holder, "/pub?topic=counted", strings.Repeat("x", 1000))
		return code == 200
	})
	read()
	if doc.Current < before+1000 {
		t.Fatalf("this hour's bytes went from %d to %d after a 1000-byte publish", before, doc.Current)
	}
	if len(doc.Hours) != 22 {
		t.Fatalf("%d hours, want youzan's 22", len(doc.Hours))
	}
	code, body := testnode.Get(t, holder, "/message/historystats")
	if code != 200 || !strings.Contains(body, `{"topic_name":"counted","topic_partition":"0","hourly_pub_size":`) {
		t.Fatalf("the holder's list: %d %s", code, body)
	}
}
