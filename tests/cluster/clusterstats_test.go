package cluster

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// clusterStatsDoc is the part of /cluster/stats the tests read.
type clusterStatsDoc struct {
	Stable       bool `json:"stable"`
	NodeStatList []struct {
		ID               string  `json:"id"`
		BroadcastAddress string  `json:"broadcast_address"`
		TCPPort          int     `json:"tcp_port"`
		HTTPPort         int     `json:"http_port"`
		LeaderLoadFactor float64 `json:"leader_load_factor"`
		Replicas         int     `json:"replicas"`
	} `json:"node_stat_list"`
	TopNTopics      []any    `json:"topn_topics"`
	Upgrading       bool     `json:"upgrading"`
	Controller      string   `json:"controller"`
	LiveNodes       int      `json:"live_nodes"`
	GoneNodes       []string `json:"gone_nodes"`
	Partitions      int      `json:"partitions"`
	Leaderless      int      `json:"leaderless_partitions"`
	UnderReplicated int      `json:"under_replicated_partitions"`
}

func clusterStats(t *testing.T, hostport string) clusterStatsDoc {
	t.Helper()
	code, body := testnode.Get(t, hostport, "/cluster/stats")
	if code != 200 {
		t.Fatalf("/cluster/stats on %s: %d %s", hostport, code, body)
	}
	var doc clusterStatsDoc
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/cluster/stats: %v: %s", err, body)
	}
	return doc
}

// youzan's nsqlookupd /cluster/stats, answered by every node from etcd:
// stable with every node listed once the topic is placed, unstable with
// the killed node named gone and its partitions short of a replica.
func TestClusterStatsOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=stats&partition_num=3&replicator=3", ""); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	for id, n := range c.nodes {
		testnode.Eventually(t, 20*time.Second, "a stable cluster of three seen by "+id, func() bool {
			doc := clusterStats(t, n.HTTP)
			return doc.Stable && doc.LiveNodes == 3 && len(doc.NodeStatList) == 3 && doc.Partitions == 3 && doc.Controller != ""
		})
	}
	doc := clusterStats(t, c.nodes["n2"].HTTP)
	leaders := 0.0
	for _, n := range doc.NodeStatList {
		if n.Replicas != 3 || n.TCPPort == 0 || n.HTTPPort == 0 || n.BroadcastAddress == "" {
			t.Fatalf("node %+v: want 3 replicas and its addresses", n)
		}
		leaders += n.LeaderLoadFactor
	}
	if leaders != 3 || doc.TopNTopics == nil || doc.GoneNodes == nil || doc.Upgrading {
		t.Fatalf("/cluster/stats %+v", doc)
	}
	if code, body := testnode.Get(t, c.nodes["n1"].HTTP, "/cluster/stats?topn=x"); code != 400 {
		t.Fatalf("topn=x: %d %s, want 400", code, body)
	}

	c.nodes["n3"].Kill(t)
	for _, id := range []string{"n1", "n2"} {
		testnode.Eventually(t, 20*time.Second, "n3 gone in "+id+"'s /cluster/stats", func() bool {
			doc := clusterStats(t, c.nodes[id].HTTP)
			return !doc.Stable && doc.LiveNodes == 2 && slices.Equal(doc.GoneNodes, []string{"n3"}) && doc.Leaderless == 0 && doc.UnderReplicated == 3
		})
	}
	t.Logf("%+v", clusterStats(t, c.nodes["n1"].HTTP))
}
