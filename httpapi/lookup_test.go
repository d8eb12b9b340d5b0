package httpapi_test

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/node"
)

// producer is one entry of nsqlookupd's producers list.
type producer struct {
	RemoteAddress    string `json:"remote_address"`
	Hostname         string `json:"hostname"`
	BroadcastAddress string `json:"broadcast_address"`
	TCPPort          int    `json:"tcp_port"`
	HTTPPort         int    `json:"http_port"`
	Version          string `json:"version"`
}

type lookupDoc struct {
	Channels   []string            `json:"channels"`
	Producers  []producer          `json:"producers"`
	Partitions map[string]producer `json:"partitions"`
	Meta       *struct {
		PartitionNum int `json:"partition_num"`
		Replica      int `json:"replica"`
	} `json:"meta"`
	Replication map[string]struct {
		Leader    string   `json:"leader"`
		Preferred string   `json:"preferred"`
		Epoch     int64    `json:"epoch"`
		ISR       []string `json:"isr"`
	} `json:"replication"`
}

// lookup GETs /lookup, checking it is plain V1 JSON.
func lookup(t *testing.T, n *testnode.Node, query string) (lookupDoc, map[string]json.RawMessage) {
	t.Helper()
	a := call(t, n, http.MethodGet, "/lookup?"+query, "")
	if a.status != http.StatusOK {
		t.Fatalf("lookup %s: %d %s", query, a.status, a.body)
	}
	if h := a.header.Get("X-NSQ-Content-Type"); h != v1Header {
		t.Fatalf("X-NSQ-Content-Type %q, want %q (go-nsq unwraps a data envelope otherwise)", h, v1Header)
	}
	var doc lookupDoc
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(a.body), &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(a.body), &keys); err != nil {
		t.Fatal(err)
	}
	return doc, keys
}

// checkProducer requires p to describe n as broadcastAddress.
func checkProducer(t *testing.T, n *testnode.Node, p producer, broadcastAddress string) {
	t.Helper()
	hostname, _ := os.Hostname()
	want := producer{
		RemoteAddress:    net.JoinHostPort(broadcastAddress, strconv.Itoa(port(t, n.TCPAddr()))),
		Hostname:         hostname,
		BroadcastAddress: broadcastAddress,
		TCPPort:          port(t, n.TCPAddr()),
		HTTPPort:         port(t, n.HTTPAddr()),
		Version:          node.Version,
	}
	if p != want {
		t.Fatalf("producer %+v, want %+v", p, want)
	}
}

func TestLookup(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=lk&partition_num=3", "", "")

	// Producers are listed before the topic has any channel.
	doc, keys := lookup(t, n, "topic=lk")
	if string(keys["channels"]) != "[]" {
		t.Fatalf("channels %s, want []", keys["channels"])
	}
	if len(doc.Producers) != 1 {
		t.Fatalf("producers %+v, want this node once", doc.Producers)
	}
	checkProducer(t, n, doc.Producers[0], "127.0.0.1")
	if len(doc.Partitions) != 3 {
		t.Fatalf("partitions %+v, want 3", doc.Partitions)
	}
	for i := range 3 {
		p, ok := doc.Partitions[strconv.Itoa(i)]
		if !ok {
			t.Fatalf("partition %d missing from %+v", i, doc.Partitions)
		}
		checkProducer(t, n, p, "127.0.0.1")
	}
	if _, ok := keys["meta"]; ok {
		t.Fatalf("meta present without metainfo=true: %s", keys["meta"])
	}

	mustPost(t, n, "/channel/create?topic=lk&channel=b", "", "")
	mustPost(t, n, "/channel/create?topic=lk&channel=a", "", "")
	doc, _ = lookup(t, n, "topic=lk&metainfo=true")
	if !slices.Equal(doc.Channels, []string{"a", "b"}) {
		t.Fatalf("channels %v, want [a b]", doc.Channels)
	}
	if doc.Meta == nil || doc.Meta.PartitionNum != 3 || doc.Meta.Replica != 1 {
		t.Fatalf("meta %+v, want partition_num 3, replica 1", doc.Meta)
	}
	// Each partition's first leader is its preferred replica.
	for p, r := range doc.Replication {
		if r.Leader == "" || r.Preferred != r.Leader || r.Epoch < 1 || !slices.Equal(r.ISR, []string{r.Leader}) {
			t.Fatalf("replication of partition %s: %+v, want its leader preferred, an epoch and an ISR of the leader", p, r)
		}
	}
	if len(doc.Replication) != 3 {
		t.Fatalf("replication %+v, want 3 partitions", doc.Replication)
	}
}

func TestLookupErrors(t *testing.T) {
	n := testnode.Start(t)
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/lookup?topic=unknown", http.StatusNotFound, "TOPIC_NOT_FOUND"},
		{"/lookup", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/channels", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			expectV1(t, n, http.MethodGet, tc.path, "", tc.status, errBody(tc.code))
		})
	}
}

func TestLookupBroadcastAddress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"host of --tcp-address", nil, "127.0.0.1"},
		{"--broadcast-address", []string{"--broadcast-address", "mq.example.internal"}, "mq.example.internal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testnode.Start(t, tc.flags...)
			mustPost(t, n, "/topic/create?topic=b", "", "")
			doc, _ := lookup(t, n, "topic=b")
			if len(doc.Producers) != 1 {
				t.Fatalf("producers %+v", doc.Producers)
			}
			checkProducer(t, n, doc.Producers[0], tc.want)
			checkProducer(t, n, doc.Partitions["0"], tc.want)
		})
	}
}

func TestLookupTopicsChannelsNodes(t *testing.T) {
	n := testnode.Start(t, "--node-id", "lk1")
	var topics struct{ Topics []string }
	getJSON(t, n, "/topics", &topics)
	if topics.Topics == nil || len(topics.Topics) != 0 {
		t.Fatalf("topics %v on a new node, want []", topics.Topics)
	}

	mustPost(t, n, "/topic/create?topic=zeta", "", "")
	mustPost(t, n, "/topic/create?topic=alpha&partition_num=2", "", "")
	mustPost(t, n, "/channel/create?topic=alpha&channel=c2", "", "")
	mustPost(t, n, "/channel/create?topic=alpha&channel=c1", "", "")

	getJSON(t, n, "/topics", &topics)
	if want := []string{"alpha", "zeta"}; !slices.Equal(topics.Topics, want) {
		t.Fatalf("topics %v, want %v", topics.Topics, want)
	}
	for _, tc := range []struct {
		topic string
		want  []string
	}{
		{"alpha", []string{"c1", "c2"}},
		{"zeta", []string{}},
		{"unknown", []string{}},
		{"not%20valid", []string{}},
	} {
		var channels struct{ Channels []string }
		getJSON(t, n, "/channels?topic="+tc.topic, &channels)
		if channels.Channels == nil || !slices.Equal(channels.Channels, tc.want) {
			t.Errorf("channels of %s: %v, want %v", tc.topic, channels.Channels, tc.want)
		}
	}

	var nodes struct {
		Producers []struct {
			ID string `json:"id"`
			producer
			Tombstones []bool   `json:"tombstones"`
			Topics     []string `json:"topics"`
		} `json:"producers"`
	}
	getJSON(t, n, "/nodes", &nodes)
	if len(nodes.Producers) != 1 {
		t.Fatalf("nodes %+v, want this node", nodes.Producers)
	}
	p := nodes.Producers[0]
	checkProducer(t, n, p.producer, "127.0.0.1")
	if p.ID != "lk1" {
		t.Fatalf("node id %q, want lk1 (--node-id)", p.ID)
	}
	if !slices.Equal(p.Topics, []string{"alpha", "zeta"}) || len(p.Tombstones) != len(p.Topics) {
		t.Fatalf("node topics %v tombstones %v", p.Topics, p.Tombstones)
	}
}

// go-nsq finds the node through its own lookup API and consumes every
// partition over the one connection.
func TestLookupConsumer(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=lc&partition_num=3", "", "")
	const total = 30
	got := make(chan string, total)
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 10
	c := newConsumer(t, "lc", "ch", cfg, nsq.HandlerFunc(func(m *nsq.Message) error {
		got <- string(m.Body)
		return nil
	}))
	if err := c.ConnectToNSQLookupd(n.HTTPAddr()); err != nil {
		t.Fatal(err)
	}
	want := make([]string, total)
	for i := range want {
		want[i] = strconv.Itoa(i)
		mustPost(t, n, "/pub?topic=lc", want[i], "OK")
	}
	var bodies []string
	deadline := time.After(waitFor)
	for len(bodies) < total {
		select {
		case b := <-got:
			bodies = append(bodies, b)
		case <-deadline:
			t.Fatalf("received %d of %d messages: %v", len(bodies), total, bodies)
		}
	}
	slices.Sort(bodies)
	slices.Sort(want)
	if !slices.Equal(bodies, want) {
		t.Fatalf("received %v, want %v", bodies, want)
	}
	for _, e := range partitionStats(t, n, "lc") {
		if e.MessageCount == 0 {
			t.Errorf("partition %s got no message; round-robin publishing should reach all 3", e.TopicPartition)
		}
	}
}

// nsqadmin tombstones a node for a topic through nsqlookupd, then POSTs
// /topic/delete to that node to drop its copy. In Partita that delete
// would drop the topic from every node, so the tombstoned node refuses it
// once; the tombstone shows in /nodes until then.
func TestLookupTombstone(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=tomb", "", "")
	mustPost(t, n, "/topic/create?topic=other", "", "")
	self := n.HTTPAddr()
	expectV1(t, n, "POST", "/topic/tombstone?node="+self, "", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC"))
	expectV1(t, n, "POST", "/topic/tombstone?topic=tomb", "", http.StatusBadRequest, errBody("MISSING_ARG_NODE"))
	expectV1(t, n, "POST", "/topic/tombstone?topic=tomb&node="+self, "", http.StatusOK, "")
	// A tombstone of another node does not concern this one's deletes.
	expectV1(t, n, "POST", "/topic/tombstone?topic=other&node=127.0.0.1:1", "", http.StatusOK, "")

	var nodes struct {
		Producers []struct {
			Tombstones []bool   `json:"tombstones"`
			Topics     []string `json:"topics"`
		} `json:"producers"`
	}
	getJSON(t, n, "/nodes", &nodes)
	if len(nodes.Producers) != 1 || !slices.Equal(nodes.Producers[0].Topics, []string{"other", "tomb"}) ||
		!slices.Equal(nodes.Producers[0].Tombstones, []bool{false, true}) {
		t.Fatalf("nodes %+v, want topics [other tomb] with tomb tombstoned", nodes.Producers)
	}

	expectV1(t, n, "POST", "/topic/delete?topic=tomb", "", http.StatusConflict, errBody("TOPIC_TOMBSTONED"))
	var topics struct{ Topics []string }
	getJSON(t, n, "/topics", &topics)
	if !slices.Equal(topics.Topics, []string{"other", "tomb"}) {
		t.Fatalf("topics %v after a refused delete, want [other tomb]", topics.Topics)
	}
	// The tombstone was used up: a delete asked for again is done.
	expectV1(t, n, "POST", "/topic/delete?topic=tomb", "", http.StatusOK, "")
	expectV1(t, n, "POST", "/topic/delete?topic=other", "", http.StatusOK, "")
	getJSON(t, n, "/topics", &topics)
	if len(topics.Topics) != 0 {
		t.Fatalf("topics %v after deleting both, want []", topics.Topics)
	}
}
