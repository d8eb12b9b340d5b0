package nsqtools

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// adminTopic is a topic with three partitions on three nodes; its channel
// "waiting" has no consumer, so its depth is every message published.
const (
	adminTopic    = "admin_orders"
	adminChannel  = "waiting"
	adminMessages = 12
)

// startAdmin runs a cluster with adminTopic filled and nsqadmin pointed at
// node 2 alone as its nsqlookupd; it returns the nodes and nsqadmin's
// HTTP address.
func startAdmin(t *testing.T) ([]*node, string) {
	t.Helper()
	nodes := startCluster(t)
	createTopic(t, nodes, adminTopic, adminChannel, "other")
	for i := range adminMessages {
		mustPost(t, nodes[i%len(nodes)].http+"/pub?topic="+adminTopic, fmt.Sprintf("m%d", i))
	}
	eventually(t, "the channel's depth is every message", func() bool {
		return channelDepth(t, nodes, adminTopic, adminChannel) == adminMessages
	})
	addr := loopbackAddrs(t, 1)[0]
	p := start(t, nil, "nsqadmin", "--http-address", addr, "--lookupd-http-address", nodes[1].http)
	eventually(t, "nsqadmin answers /ping", func() bool {
		select {
		case <-p.done:
			t.Fatalf("nsqadmin exited: %v\n%s", p.err, p.out)
		default:
		}
		code, _ := get(addr + "/ping")
		return code == http.StatusOK
	})
	return nodes, addr
}

// nsqadmin's own API, which its pages render: the cluster's nodes, the
// topic, its channels and their depth summed over the partitions' leaders
// (each message once, not once per replica).
func TestNSQAdminAPI(t *testing.T) {
	nodes, admin := startAdmin(t)

	var ns struct {
		Nodes []struct {
			BroadcastAddress string `json:"broadcast_address"`
			TCPPort          int    `json:"tcp_port"`
			HTTPPort         int    `json:"http_port"`
			Topics           []struct {
				Topic string `json:"topic"`
			} `json:"topics"`
		} `json:"nodes"`
		Message string `json:"message"`
	}
	if err := getJSON(admin+"/api/nodes", &ns); err != nil {
		t.Fatal(err)
	}
	var gotNodes, wantNodes []string
	leading := 0
	for _, n := range ns.Nodes {
		gotNodes = append(gotNodes, fmt.Sprintf("%s:%d", n.BroadcastAddress, n.HTTPPort))
		for _, tp := range n.Topics {
			if tp.Topic == adminTopic {
				leading++
			}
		}
	}
	for _, n := range nodes {
		wantNodes = append(wantNodes, n.http)
	}
	slices.Sort(gotNodes)
	slices.Sort(wantNodes)
	if !slices.Equal(gotNodes, wantNodes) || ns.Message != "" {
		t.Fatalf("nsqadmin lists nodes %v (message %q), want %v", gotNodes, ns.Message, wantNodes)
	}
	if leading == 0 {
		t.Fatalf("no node lists %s among its topics: %+v", adminTopic, ns.Nodes)
	}

	var topics struct {
		Topics  []string `json:"topics"`
		Message string   `json:"message"`
	}
	if err := getJSON(admin+"/api/topics", &topics); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(topics.Topics, adminTopic) || topics.Message != "" {
		t.Fatalf("nsqadmin lists topics %v (message %q), want %s among them", topics.Topics, topics.Message, adminTopic)
	}

	var topic struct {
		TopicName    string `json:"topic_name"`
		MessageCount int64  `json:"message_count"`
		Nodes        []struct {
			Node string `json:"node"`
		} `json:"nodes"`
		Channels []struct {
			ChannelName string `json:"channel_name"`
			Depth       int64  `json:"depth"`
		} `json:"channels"`
		Message string `json:"message"`
	}
	if err := getJSON(admin+"/api/topics/"+adminTopic, &topic); err != nil {
		t.Fatal(err)
	}
	if topic.Message != "" {
		t.Fatalf("nsqadmin warns about the topic: %s", topic.Message)
	}
	// One row per partition, under the node that leads it.
	if len(topic.Nodes) != 3 || topic.MessageCount != adminMessages {
		t.Fatalf("topic page: %d partition rows, %d messages; want 3 rows, %d messages: %+v", len(topic.Nodes), topic.MessageCount, adminMessages, topic)
	}
	depths := map[string]int64{}
	for _, c := range topic.Channels {
		depths[c.ChannelName] = c.Depth
	}
	if len(depths) != 2 || depths[adminChannel] != adminMessages || depths["other"] != adminMessages {
		t.Fatalf("topic page channels %v, want %s and other at depth %d", depths, adminChannel, adminMessages)
	}

	var ch struct {
		Depth   int64  `json:"depth"`
		Message string `json:"message"`
	}
	if err := getJSON(admin+"/api/topics/"+adminTopic+"/"+adminChannel, &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Depth != adminMessages || ch.Message != "" {
		t.Fatalf("channel page depth %d (message %q), want %d", ch.Depth, ch.Message, adminMessages)
	}

	// The pages themselves are nsqadmin's single-page app; the browser test
	// renders them.
	for _, page := range []string{"/", "/nodes", "/topics/" + adminTopic} {
		code, body := get(admin + page)
		if code != http.StatusOK || !strings.Contains(string(body), "<html") {
			t.Fatalf("GET %s: %d %.200s", page, code, body)
		}
	}
}

// nsqadmin's actions reach every node: emptying and deleting a channel,
// tombstoning a node for the topic (which must not delete the topic, as a
// Partita delete is cluster-wide) and deleting the topic.
func TestNSQAdminActions(t *testing.T) {
	nodes, admin := startAdmin(t)
	call := func(method, path, body string) string {
		t.Helper()
		code, b := do(t, method, admin+path, body)
		var doc struct {
			Message string `json:"message"`
		}
		json.Unmarshal(b, &doc)
		if code != http.StatusOK {
			t.Fatalf("%s %s %s: %d %s", method, path, body, code, doc.Message)
		}
		return doc.Message
	}
	everywhere := func(what string, cond func(n *node) bool) {
		t.Helper()
		eventually(t, what+" on every node", func() bool {
			for _, n := range nodes {
				if !cond(n) {
					return false
				}
			}
			return true
		})
	}
	hasChannel := func(n *node, c string) bool {
		var doc struct{ Channels []string }
		return getJSON(n.http+"/channels?topic="+adminTopic, &doc) == nil && slices.Contains(doc.Channels, c)
	}
	hasTopic := func(n *node) bool {
		var doc struct{ Topics []string }
		return getJSON(n.http+"/topics", &doc) == nil && slices.Contains(doc.Topics, adminTopic)
	}

	if msg := call("POST", "/api/topics/"+adminTopic+"/other", `{"action":"empty"}`); msg != "" {
		t.Fatalf("empty: %s", msg)
	}
	eventually(t, "emptying through nsqadmin drains the channel on every leader", func() bool {
		return channelDepth(t, nodes, adminTopic, "other") == 0
	})
	if d := channelDepth(t, nodes, adminTopic, adminChannel); d != adminMessages {
		t.Fatalf("the other channel's depth is %d, want %d untouched", d, adminMessages)
	}

	// nsqadmin deletes through nsqlookupd first, which in Partita deletes
	// everywhere; its later deletes on each leader find nothing left and
	// come back as warnings in the API's message (the page ignores them).
	t.Logf("delete channel: %s", call("DELETE", "/api/topics/"+adminTopic+"/other", ""))
	everywhere("the deleted channel is gone", func(n *node) bool { return !hasChannel(n, "other") && hasChannel(n, adminChannel) })

	msg := call("DELETE", "/api/nodes/"+nodes[0].http, `{"topic":"`+adminTopic+`"}`)
	if !strings.Contains(msg, "TOPIC_TOMBSTONED") {
		t.Fatalf("tombstoning %s for the topic: nsqadmin says %q, want the node's refusal TOPIC_TOMBSTONED", nodes[0].http, msg)
	}
	for _, n := range nodes {
		if !hasTopic(n) {
			t.Fatalf("%s lost the topic after a tombstone", n.id)
		}
	}
	if d := channelDepth(t, nodes, adminTopic, adminChannel); d != adminMessages {
		t.Fatalf("depth %d after a tombstone, want %d", d, adminMessages)
	}

	t.Logf("delete topic: %s", call("DELETE", "/api/topics/"+adminTopic, ""))
	everywhere("the deleted topic is gone", func(n *node) bool { return !hasTopic(n) })
}
