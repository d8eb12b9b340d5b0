package nsqtools

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/nsqio/go-nsq"
)

// nsqd and nsqlookupd v1.3.0 beside Partita, the same operations on both,
// and every JSON document of /stats, /info, /lookup, /nodes, /topics and
// /channels compared by shape: each key nsq's answer has, Partita's has too,
// with a value of the same JSON kind. Clients in dynamic languages iterate
// these documents, so a list that is [] in nsq's and null in Partita's, or
// the other way round, breaks them. Partita may add keys of its own. Then
// /config/:opt, compared byte for byte.
func TestAnswersMatchNSQ(t *testing.T) {
	nodes := startCluster(t)
	lookupd, nsqdHTTP, nsqdTCP := startNSQ(t)

	const topic, channel = "shapes", "c1"
	createTopic(t, nodes, topic, channel)
	mustPost(t, nsqdHTTP+"/topic/create?topic="+topic, "")
	mustPost(t, nsqdHTTP+"/channel/create?topic="+topic+"&channel="+channel, "")

	// A producer and a consumer connected to each, so the client lists
	// have members whose shape counts too.
	leader := leaderOf(t, nodes, topic)
	for _, tcp := range []string{nsqdTCP, leader.tcp} {
		connectClients(t, tcp, topic, channel)
	}
	eventually(t, "nsqlookupd knows nsqd's topic and channel", func() bool {
		var doc struct{ Channels, Producers []json.RawMessage }
		return getJSON(lookupd+"/lookup?topic="+topic, &doc) == nil && len(doc.Channels) == 1 && len(doc.Producers) == 1
	})
	eventually(t, "both list a producer and a consumer", func() bool {
		return clientsListed(nsqdHTTP, topic) && clientsListed(leader.http, topic)
	})

	cases := []struct{ path, nsq, partita string }{
		{"/stats?format=json", nsqdHTTP, leader.http},
		{"/stats?format=json&topic=" + topic, nsqdHTTP, leader.http},
		{"/stats?format=json&topic=" + topic + "&channel=" + channel, nsqdHTTP, leader.http},
		{"/stats?format=json&topic=nosuch", nsqdHTTP, leader.http},
		{"/stats?format=json&topic=" + topic + "&channel=nosuch", nsqdHTTP, leader.http},
		{"/stats?format=json&include_clients=false", nsqdHTTP, leader.http},
		{"/info", nsqdHTTP, leader.http},
		{"/lookup?topic=" + topic, lookupd, nodes[1].http},
		{"/nodes", lookupd, nodes[1].http},
		{"/topics", lookupd, nodes[1].http},
		{"/channels?topic=" + topic, lookupd, nodes[1].http},
		{"/channels?topic=nosuch", lookupd, nodes[1].http},
	}
	var diffs []string
	for _, c := range cases {
		want, got := document(t, c.nsq+c.path), document(t, c.partita+c.path)
		for _, d := range shapeDiff("", want, got) {
			diffs = append(diffs, c.path+": "+d)
		}
	}
	if len(diffs) > 0 {
		t.Fatalf("Partita's JSON differs in shape from nsq's:\n%s", strings.Join(diffs, "\n"))
	}

	// /config/:opt answers as nsqd's does, status and body, for the log
	// level and for what it refuses.
	for _, step := range []struct{ method, path, body string }{
		{"GET", "/config/log_level", ""},
		{"PUT", "/config/log_level", "debug"},
		{"GET", "/config/log_level", ""},
		{"PUT", "/config/log_level", "loud"},
		{"PUT", "/config/log_level", ""},
		{"PUT", "/config/log_level", "warn"},
		{"GET", "/config/log_level", ""},
		{"GET", "/config/nosuch", ""},
		{"PUT", "/config/nosuch", "1"},
	} {
		wantCode, wantBody := do(t, step.method, nsqdHTTP+step.path, step.body)
		gotCode, gotBody := do(t, step.method, leader.http+step.path, step.body)
		if gotCode != wantCode || string(gotBody) != string(wantBody) {
			t.Errorf("%s %s %q: Partita answered %d %s, nsqd %d %s", step.method, step.path, step.body,
				gotCode, gotBody, wantCode, wantBody)
		}
	}
	// nsqd says INVALID_OPTION for an option it has but will not change
	// while running; Partita says which it is.
	if code, body := do(t, "PUT", leader.http+"/config/data_path", "/tmp"); code != http.StatusBadRequest ||
		!strings.Contains(string(body), "OPTION_NOT_CHANGEABLE") {
		t.Errorf("PUT /config/data_path: %d %s, want 400 OPTION_NOT_CHANGEABLE", code, body)
	}
}

// startNSQ runs nsqlookupd and an nsqd registered with it, with the extra
// nsqd flags; it returns nsqlookupd's HTTP address and nsqd's HTTP and TCP
// addresses.
func startNSQ(t *testing.T, extra ...string) (lookupdHTTP, nsqdHTTP, nsqdTCP string) {
	t.Helper()
	a := loopbackAddrs(t, 4)
	lookupd := start(t, nil, "nsqlookupd", "--tcp-address", a[0], "--http-address", a[1], "--log-level", "warn")
	args := append([]string{"--tcp-address", a[2], "--http-address", a[3], "--data-path", t.TempDir(),
		"--lookupd-tcp-address", a[0], "--broadcast-address", "127.0.0.1", "--log-level", "warn"}, extra...)
	nsqd := start(t, nil, "nsqd", args...)
	waitPing(t, "nsqlookupd", lookupd, a[1])
	waitPing(t, "nsqd", nsqd, a[3])
	return a[1], a[3], a[2]
}

// leaderOf is the node leading the topic's partition 0.
func leaderOf(t *testing.T, nodes []*node, topic string) *node {
	t.Helper()
	for _, n := range nodes {
		var doc struct {
			Topics []struct {
				Partition string `json:"topic_partition"`
				Leader    bool   `json:"is_leader"`
			} `json:"topics"`
		}
		if err := getJSON(n.http+"/stats?format=json&topic="+topic, &doc); err != nil {
			t.Fatal(err)
		}
		for _, tp := range doc.Topics {
			if tp.Partition == "0" && tp.Leader {
				return n
			}
		}
	}
	t.Fatalf("no node leads %s/0", topic)
	return nil
}

// connectClients publishes one message to tcp and subscribes to it, both
// connections staying open until the test ends.
func connectClients(t *testing.T, tcp, topic, channel string) {
	t.Helper()
	cfg := nsq.NewConfig()
	p, err := nsq.NewProducer(tcp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.SetLoggerLevel(nsq.LogLevelError)
	t.Cleanup(p.Stop)
	if err := p.Publish(topic, []byte("shape")); err != nil {
		t.Fatalf("publish to %s: %v", tcp, err)
	}
	c, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetLoggerLevel(nsq.LogLevelError)
	// The message stays in flight, so the in-flight lists are not empty.
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error { m.DisableAutoResponse(); return nil }))
	if err := c.ConnectToNSQD(tcp); err != nil {
		t.Fatalf("subscribe to %s: %v", tcp, err)
	}
	t.Cleanup(c.Stop)
}

// clientsListed: /stats shows a producer, and a consumer on the topic.
func clientsListed(httpAddr, topic string) bool {
	var doc struct {
		Producers []json.RawMessage `json:"producers"`
		Topics    []struct {
			Channels []struct {
				Clients []json.RawMessage `json:"clients"`
			} `json:"channels"`
		} `json:"topics"`
	}
	if getJSON(httpAddr+"/stats?format=json&topic="+topic, &doc) != nil || len(doc.Producers) == 0 {
		return false
	}
	for _, tp := range doc.Topics {
		for _, c := range tp.Channels {
			if len(c.Clients) > 0 {
				return true
			}
		}
	}
	return false
}

func document(t *testing.T, url string) any {
	t.Helper()
	code, body := get(url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
	return v
}

// kind is a JSON value's kind as a client sees it.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// shapeDiff lists where got lacks a key want has or holds another kind of
// value there. Lists are compared by their first members, when both have
// one: the members of one list share a shape in these documents.
func shapeDiff(at string, want, got any) []string {
	if kind(want) != kind(got) {
		return []string{fmt.Sprintf("%s is %s, nsq's is %s", orRoot(at), kind(got), kind(want))}
	}
	var diffs []string
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s lacks %q (nsq's is %s)", orRoot(at), k, kind(w[k])))
				continue
			}
			diffs = append(diffs, shapeDiff(at+"."+k, w[k], gv)...)
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 && len(g) > 0 {
			diffs = append(diffs, shapeDiff(at+"[0]", w[0], g[0])...)
		}
	}
	return slices.Compact(diffs)
}

func orRoot(at string) string {
	if at == "" {
		return "the document"
	}
	return at
}
