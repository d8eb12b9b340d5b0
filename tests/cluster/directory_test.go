package cluster

import (
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// getDoc GETs a node's JSON with an optional Accept header.
func getDoc(t *testing.T, hostport, pathAndQuery, accept string, v any) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+hostport+pathAndQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s on %s: %d", pathAndQuery, hostport, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// Every node answers nsqlookupd's /topics, /channels and /nodes for the
// whole cluster, also for topics it holds no partition of; /nodes gives
// each node the topics it leads.
func TestDirectoryOnAnyNode(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("solo", 1) // one partition on one node
	if code, body := testnode.Post(t, c.nodes[st.Leader].HTTP, "/channel/create?topic=solo&channel=ch", ""); code != http.StatusOK {
		t.Fatalf("creating the channel: %d %s", code, body)
	}
	for id, n := range c.nodes {
		var topics struct{ Topics []string }
		getDoc(t, n.HTTP, "/topics", "", &topics)
		if !slices.Equal(topics.Topics, []string{"solo"}) {
			t.Fatalf("%s /topics %v, want [solo]", id, topics.Topics)
		}
		testnode.Eventually(t, 10*time.Second, id+" lists the channel", func() bool {
			var chans struct{ Channels []string }
			getDoc(t, n.HTTP, "/channels?topic=solo", "", &chans)
			return slices.Equal(chans.Channels, []string{"ch"})
		})
		var nodes struct {
			Producers []struct {
				HTTPPort   int      `json:"http_port"`
				Topics     []string `json:"topics"`
				Tombstones []bool   `json:"tombstones"`
			} `json:"producers"`
		}
		getDoc(t, n.HTTP, "/nodes", "", &nodes)
		if len(nodes.Producers) != 3 {
			t.Fatalf("%s /nodes lists %d nodes, want 3", id, len(nodes.Producers))
		}
		for _, p := range nodes.Producers {
			leads := p.HTTPPort == port(t, c.nodes[st.Leader].HTTP)
			if want := leads; slices.Equal(p.Topics, []string{"solo"}) != want || len(p.Tombstones) != len(p.Topics) {
				t.Fatalf("%s /nodes: node on port %d has topics %v tombstones %v; the leader %s alone should list solo",
					id, p.HTTPPort, p.Topics, p.Tombstones, st.Leader)
			}
		}
	}
}

// /stats lists every partition a node holds, followers included, but
// nsqio's tools (nsqadmin, nsq_stat), which add up the /stats of every
// leader /lookup names, see only the partitions the node leads, so each
// message counts once.
func TestStatsLeadersOnlyForNSQTools(t *testing.T) {
	c := startCluster(t, 3)
	testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=rep&partition_num=3&replicator=3", "")
	type entry struct {
		Partition string `json:"topic_partition"`
		IsLeader  bool   `json:"is_leader"`
	}
	type stats struct{ Topics []entry }
	leadersOf := func(doc stats) (n int) {
		for _, e := range doc.Topics {
			if e.IsLeader {
				n++
			}
		}
		return n
	}
	testnode.Eventually(t, 10*time.Second, "every node holds the three partitions and each partition has a leader", func() bool {
		led := 0
		for _, n := range c.nodes {
			var all stats
			getDoc(t, n.HTTP, "/stats?format=json&topic=rep", "", &all)
			if len(all.Topics) != 3 {
				return false
			}
			led += leadersOf(all)
		}
		return led == 3
	})
	for id, n := range c.nodes {
		var all, tools, overridden stats
		getDoc(t, n.HTTP, "/stats?format=json&topic=rep", "", &all)
		getDoc(t, n.HTTP, "/stats?format=json&topic=rep", "application/vnd.nsq; version=1.0", &tools)
		getDoc(t, n.HTTP, "/stats?format=json&topic=rep&leaders_only=false", "application/vnd.nsq; version=1.0", &overridden)
		for _, e := range tools.Topics {
			if !e.IsLeader {
				t.Fatalf("%s shows nsqio's tools the follower partition %s", id, e.Partition)
			}
		}
		if len(tools.Topics) != leadersOf(all) || len(overridden.Topics) != 3 {
			t.Fatalf("%s: %d entries for nsqio's tools, want its %d leaders; %d with leaders_only=false, want 3",
				id, len(tools.Topics), leadersOf(all), len(overridden.Topics))
		}
	}
}

// port is the port of a host:port.
func port(t *testing.T, hostport string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
