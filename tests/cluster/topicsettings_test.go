package cluster

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// youzan's /topic/meta/update, sent to any node, reaches every replica:
// each node's /stats shows the new settings for the partitions it holds
// and its /lookup the topic's meta. On a topic that creates no channel on
// SUB, a channel created through one node is subscribed on another at
// once, and one never created is refused.
func TestTopicSettingsReachEveryReplica(t *testing.T) {
	c := startCluster(t, 3)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP,
		"/topic/create?topic=yzs&partition_num=2&replicator=3&syncdisk=5&disable_channel_auto_create=true", ""); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	if code, body := testnode.Post(t, c.nodes["n3"].HTTP, "/topic/meta/update?topic=yzs&syncdisk=7&retention=3", ""); code != 200 {
		t.Fatalf("meta/update: %d %s", code, body)
	}
	type entry struct {
		SyncDisk      int  `json:"syncdisk"`
		RetentionDays int  `json:"retention_days"`
		NoAutoCreate  bool `json:"is_channel_auto_create_disabled"`
	}
	want := entry{SyncDisk: 7, RetentionDays: 3, NoAutoCreate: true}
	for id, n := range c.nodes {
		var last []entry
		testnode.Eventually(t, 10*time.Second, id+" applying the settings to both replicas", func() bool {
			var doc struct {
				Topics []entry `json:"topics"`
			}
			getDoc(t, n.HTTP, "/stats?format=json&leaders_only=false&include_mem=false&topic=yzs", "", &doc)
			last = doc.Topics
			return len(last) == 2 && last[0] == want && last[1] == want
		})
		var lk struct {
			Meta struct {
				SyncDisk      int  `json:"syncdisk"`
				RetentionDays int  `json:"retention_days"`
				NoAutoCreate  bool `json:"disable_channel_auto_create"`
			} `json:"meta"`
		}
		getDoc(t, n.HTTP, "/lookup?topic=yzs&metainfo=true", "", &lk)
		if lk.Meta.SyncDisk != 7 || lk.Meta.RetentionDays != 3 || !lk.Meta.NoAutoCreate {
			t.Fatalf("%s /lookup meta %+v", id, lk.Meta)
		}
	}

	st := c.state("yzs", 0)
	var other string
	for id := range c.nodes {
		if id != st.Leader {
			other = id
		}
	}
	if code, body := testnode.Post(t, c.nodes[other].HTTP, "/channel/create?topic=yzs&channel=billing", ""); code != 200 {
		t.Fatalf("channel/create on %s: %d %s", other, code, body)
	}
	r := dialRaw(t, c.nodes[st.Leader].TCP)
	r.send("SUB yzs billing 0")
	if typ, data := r.frame(5 * time.Second); typ != protocol.FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("SUB to a channel created on %s: frame %d %q", other, typ, data)
	}
	r2 := dialRaw(t, c.nodes[st.Leader].TCP)
	r2.send("SUB yzs audit 0")
	if typ, data := r2.frame(5 * time.Second); typ != protocol.FrameTypeError || !strings.HasPrefix(string(data), "E_SUB_CHANNEL_NOT_REGISTERED") {
		t.Fatalf("SUB to a channel never created: frame %d %q", typ, data)
	}
}

// youzan's clients read /listlookup from one lookup address and then ask
// every node it lists: each node lists the same three nodes, at the
// addresses they answer on, and the same leader.
func TestListLookupOnEveryNode(t *testing.T) {
	c := startCluster(t, 3)
	type node struct {
		ID       string
		NodeIP   string
		HttpPort string
		TcpPort  string
	}
	want := map[string]node{}
	for id, n := range c.nodes {
		host, httpPort, _ := net.SplitHostPort(n.HTTP)
		_, tcpPort, _ := net.SplitHostPort(n.TCP)
		want[id] = node{ID: id, NodeIP: host, HttpPort: httpPort, TcpPort: tcpPort}
	}
	leaders := map[string]bool{}
	for id, n := range c.nodes {
		var doc struct {
			Nodes  []node `json:"lookupdnodes"`
			Leader node   `json:"lookupdleader"`
		}
		testnode.Eventually(t, 10*time.Second, id+" listing the three nodes and a leader", func() bool {
			getDoc(t, n.HTTP, "/listlookup", "", &doc)
			return len(doc.Nodes) == 3 && doc.Leader.ID != ""
		})
		for _, got := range doc.Nodes {
			if got != want[got.ID] {
				t.Fatalf("%s lists %+v, want %+v", id, got, want[got.ID])
			}
		}
		if doc.Leader != want[doc.Leader.ID] {
			t.Fatalf("%s names leader %+v, want one of the nodes", id, doc.Leader)
		}
		leaders[doc.Leader.ID] = true
	}
	if len(leaders) != 1 {
		t.Fatalf("the nodes name different leaders: %v", leaders)
	}
}
