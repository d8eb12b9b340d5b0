package httpapi_test

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/node"
)

func TestPing(t *testing.T) {
	n := testnode.Start(t)
	a := call(t, n, http.MethodGet, "/ping", "")
	if a.status != http.StatusOK || a.body != "OK" {
		t.Fatalf("got %d %q, want 200 OK", a.status, a.body)
	}
	if !strings.HasPrefix(a.header.Get("Content-Type"), "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", a.header.Get("Content-Type"))
	}
	if h := a.header.Get("X-NSQ-Content-Type"); h != "" {
		t.Errorf("/ping has X-NSQ-Content-Type %q; nsqd sends none", h)
	}
}

func TestHTTPpub(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/pub?topic=test", "test message", "OK")
	waitTopicDepth(t, n, "test", 1)
}

func TestHTTPpubEmpty(t *testing.T) {
	n := testnode.Start(t)
	expectV1(t, n, http.MethodPost, "/pub?topic=test", "", http.StatusBadRequest, errBody("MSG_EMPTY"))
	if d := topicDepth(t, n, "test"); d != 0 {
		t.Fatalf("depth %d after an empty PUB, want 0", d)
	}
}

func TestHTTPpubErrors(t *testing.T) {
	n := testnode.Start(t, "--max-msg-size", "10", "--max-req-timeout", "1s")
	for _, tc := range []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"missing topic", "/pub", "msg", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"invalid topic", "/pub?topic=bad$", "msg", http.StatusBadRequest, "INVALID_TOPIC"},
		{"too big", "/pub?topic=t", "12345678901", http.StatusRequestEntityTooLarge, "MSG_TOO_BIG"},
		{"defer not a number", "/pub?topic=t&defer=soon", "msg", http.StatusBadRequest, "INVALID_DEFER"},
		{"defer negative", "/pub?topic=t&defer=-1", "msg", http.StatusBadRequest, "INVALID_DEFER"},
		{"defer over max-req-timeout", "/pub?topic=t&defer=1001", "msg", http.StatusBadRequest, "INVALID_DEFER"},
		{"mpub line too big", "/mpub?topic=t", "ok\n12345678901", http.StatusRequestEntityTooLarge, "MSG_TOO_BIG"},
		{"mpub binary bad count", "/mpub?topic=t&binary=true", "\x00\x00", http.StatusRequestEntityTooLarge, "BAD_BODY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, tc.path, tc.body, tc.status, errBody(tc.code))
		})
	}
	if d := topicDepth(t, n, "t"); d != 0 {
		t.Fatalf("rejected publishes left depth %d", d)
	}
}

func TestHTTPmpub(t *testing.T) {
	n := testnode.Start(t)
	body := strings.Join([]string{"test message", "test message", "test message", "test message"}, "\n")
	mustPost(t, n, "/mpub?topic=test", body, "OK")
	waitTopicDepth(t, n, "test", 4)
}

func TestHTTPmpubEmpty(t *testing.T) {
	n := testnode.Start(t)
	body := strings.Repeat("test message\n", 4)
	mustPost(t, n, "/mpub?topic=test", body, "OK")
	waitTopicDepth(t, n, "test", 4)
}

// mpubBinaryBody is the MPUB body without its outer size.
func mpubBinaryBody(msgs ...string) string {
	var b bytes.Buffer
	binary.Write(&b, binary.BigEndian, int32(len(msgs)))
	for _, m := range msgs {
		binary.Write(&b, binary.BigEndian, int32(len(m)))
		b.WriteString(m)
	}
	return b.String()
}

func testMPUBBinary(t *testing.T, binaryParam string) {
	n := testnode.Start(t)
	body := mpubBinaryBody("m1", "m2", "m3\nwith a newline", "m4", "m5")
	mustPost(t, n, "/mpub?topic=test&binary="+binaryParam, body, "OK")
	waitTopicDepth(t, n, "test", 5)
}

func TestHTTPmpubBinary(t *testing.T) { testMPUBBinary(t, "true") }

func TestHTTPmpubForNonNormalizedBinaryParam(t *testing.T) {
	testMPUBBinary(t, "non_normalized_binary_param")
}

func TestHTTPpubDefer(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=test", "", "")
	mustPost(t, n, "/channel/create?topic=test&channel=ch", "", "")
	mustPost(t, n, "/pub?topic=test&defer=1000", "test message", "OK")
	waitChannel(t, n, "test", "ch", "one deferred message", func(cs channelStats) bool {
		return cs.DeferredCount == 1 && cs.Depth == 0
	})
	waitChannel(t, n, "test", "ch", "the deferred message due", func(cs channelStats) bool {
		return cs.DeferredCount == 0 && cs.Depth == 1
	})
}

func TestHTTPV1TopicChannel(t *testing.T) {
	n := testnode.Start(t)
	topicPaused := func(want bool) func(t *testing.T) {
		return func(t *testing.T) {
			for _, ts := range partitionStats(t, n, "v1") {
				if ts.Paused != want {
					t.Fatalf("partition %s paused %v, want %v", ts.TopicPartition, ts.Paused, want)
				}
			}
		}
	}
	channelPaused := func(want bool) func(t *testing.T) {
		return func(t *testing.T) {
			waitChannel(t, n, "v1", "ch", "pause state", func(cs channelStats) bool { return cs.Paused == want })
		}
	}
	for _, step := range []struct {
		path  string
		after func(t *testing.T)
	}{
		{"/topic/create?topic=v1", func(t *testing.T) {
			if len(partitionStats(t, n, "v1")) == 0 {
				t.Fatal("topic not created")
			}
		}},
		{"/channel/create?topic=v1&channel=ch", func(t *testing.T) {
			if _, ok := channelTotals(t, n, "v1", "ch"); !ok {
				t.Fatal("channel not created")
			}
		}},
		{"/topic/pause?topic=v1", topicPaused(true)},
		{"/topic/unpause?topic=v1", topicPaused(false)},
		{"/channel/pause?topic=v1&channel=ch", channelPaused(true)},
		{"/channel/unpause?topic=v1&channel=ch", channelPaused(false)},
		{"/channel/delete?topic=v1&channel=ch", func(t *testing.T) {
			if _, ok := channelTotals(t, n, "v1", "ch"); ok {
				t.Fatal("channel still listed after delete")
			}
		}},
		{"/topic/delete?topic=v1", func(t *testing.T) {
			if ts := partitionStats(t, n, "v1"); len(ts) != 0 {
				t.Fatalf("topic still listed after delete: %+v", ts)
			}
		}},
	} {
		t.Run(step.path, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, step.path, "", http.StatusOK, "")
			step.after(t)
		})
	}

	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/topic/pause", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/topic/pause?topic=missing", http.StatusNotFound, "TOPIC_NOT_FOUND"},
		{"/topic/unpause?topic=missing", http.StatusNotFound, "TOPIC_NOT_FOUND"},
		{"/topic/create", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/topic/create?topic=bad$", http.StatusBadRequest, "INVALID_TOPIC"},
		{"/channel/create?channel=ch", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/channel/create?topic=bad$&channel=ch", http.StatusBadRequest, "INVALID_ARG_TOPIC"},
		{"/channel/create?topic=v1", http.StatusBadRequest, "MISSING_ARG_CHANNEL"},
		{"/channel/create?topic=v1&channel=bad$", http.StatusBadRequest, "INVALID_ARG_CHANNEL"},
		{"/channel/create?topic=missing&channel=ch", http.StatusNotFound, "TOPIC_NOT_FOUND"},
		{"/channel/pause?topic=missing&channel=ch", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, tc.path, "", tc.status, errBody(tc.code))
		})
	}
}

func TestHTTPClientStats(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=cs", "", "")
	c := newConsumer(t, "cs", "ch", nil, nsq.HandlerFunc(func(*nsq.Message) error { return nil }))
	if err := c.ConnectToNSQD(n.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	waitChannel(t, n, "cs", "ch", "one subscribed client", func(cs channelStats) bool {
		return cs.ClientCount == 1 && len(cs.Clients) == 1
	})

	for _, tc := range []struct {
		query       string
		clients     int
		memoryShown bool
	}{
		{"", 1, true},
		{"include_clients=true&include_mem=true", 1, true},
		{"include_clients=false", 0, true},
		{"include_clients=0&include_mem=0", 0, false},
		{"include_mem=false", 1, false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			doc := getStats(t, n, "topic=cs&"+tc.query)
			if len(doc.Topics) != 1 || len(doc.Topics[0].Channels) != 1 {
				t.Fatalf("want one topic with one channel, got %+v", doc.Topics)
			}
			ch := doc.Topics[0].Channels[0]
			if ch.ClientCount != 1 {
				t.Errorf("client_count %d, want 1", ch.ClientCount)
			}
			// Without clients the list is null, as nsqd v1.3.0 sends it
			// (tests/nsqtools compares the two).
			if (ch.Clients == nil) != (tc.clients == 0) || len(ch.Clients) != tc.clients {
				t.Errorf("clients %#v, want %d entries (null for none)", ch.Clients, tc.clients)
			}
			if shown := len(doc.Memory) > 0; shown != tc.memoryShown {
				t.Errorf("memory shown %v, want %v", shown, tc.memoryShown)
			}
		})
	}
}

func TestHTTPgetStatusJSON(t *testing.T) {
	before := time.Now().Unix()
	n := testnode.Start(t)
	after := time.Now().Unix()
	status, body := n.Get(t, "/stats?format=json")
	if status != http.StatusOK {
		t.Fatalf("got %d %s", status, body)
	}
	prefix := regexp.MustCompile(`^\{"version":"` + regexp.QuoteMeta(node.Version) +
		`","health":"OK","start_time":(\d+),"topics":\[\],"memory":\{`)
	m := prefix.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("body does not start as nsqd's does: %s", body)
	}
	start, _ := strconv.ParseInt(m[1], 10, 64)
	if start < before || start > after {
		t.Fatalf("start_time %d outside [%d, %d]", start, before, after)
	}
}

func TestHTTPgetStatusText(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/pub?topic=texttopic", "m", "OK")
	status, body := n.Get(t, "/stats")
	if status != http.StatusOK {
		t.Fatalf("got %d %s", status, body)
	}
	if !strings.Contains(body, "texttopic") || !strings.Contains(body, "health: OK") {
		t.Fatalf("text stats miss the topic or health:\n%s", body)
	}
}

func TestHTTPerrors(t *testing.T) {
	n := testnode.Start(t)
	for _, tc := range []struct {
		method, path string
		status       int
		code         string
	}{
		{http.MethodPost, "/stats", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodGet, "/pub?topic=t", http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED"},
		{http.MethodGet, "/not_found", http.StatusNotFound, "NOT_FOUND"},
		{http.MethodPost, "/put?topic=t", http.StatusNotFound, "NOT_FOUND"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			expectV1(t, n, tc.method, tc.path, "", tc.status, errBody(tc.code))
		})
	}
}

func TestDeleteTopic(t *testing.T) {
	n := testnode.Start(t)
	expectV1(t, n, http.MethodPost, "/topic/delete", "", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC"))
	expectV1(t, n, http.MethodPost, "/topic/delete?topic=test", "", http.StatusNotFound, errBody("TOPIC_NOT_FOUND"))

	mustPost(t, n, "/pub?topic=test", "m", "OK")
	mustPost(t, n, "/channel/create?topic=test&channel=ch", "", "")
	expectV1(t, n, http.MethodPost, "/topic/delete?topic=test", "", http.StatusOK, "")
	var topics struct{ Topics []string }
	getJSON(t, n, "/topics", &topics)
	if len(topics.Topics) != 0 {
		t.Fatalf("topics after delete: %v", topics.Topics)
	}

	// A topic made again under the deleted name starts empty.
	mustPost(t, n, "/topic/create?topic=test", "", "")
	if d := topicDepth(t, n, "test"); d != 0 {
		t.Fatalf("re-created topic has depth %d", d)
	}
	if _, ok := channelTotals(t, n, "test", "ch"); ok {
		t.Fatal("re-created topic kept the deleted topic's channel")
	}
}

func TestEmptyTopic(t *testing.T) {
	n := testnode.Start(t)
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/topic/empty", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/topic/empty?topic=test$", http.StatusBadRequest, "INVALID_TOPIC"},
		{"/topic/empty?topic=test", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, tc.path, "", tc.status, errBody(tc.code))
		})
	}

	mustPost(t, n, "/mpub?topic=test", "a\nb\nc", "OK")
	waitTopicDepth(t, n, "test", 3)
	expectV1(t, n, http.MethodPost, "/topic/empty?topic=test", "", http.StatusOK, "")
	waitTopicDepth(t, n, "test", 0)

	// What was emptied is not handed to a channel created afterwards.
	mustPost(t, n, "/pub?topic=test", "d", "OK")
	mustPost(t, n, "/channel/create?topic=test&channel=ch", "", "")
	waitChannelDepth(t, n, "test", "ch", 1)
}

func TestEmptyChannel(t *testing.T) {
	n := testnode.Start(t)
	for _, tc := range []struct {
		path   string
		status int
		code   string
	}{
		{"/channel/empty", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/channel/empty?topic=test", http.StatusBadRequest, "MISSING_ARG_CHANNEL"},
		{"/channel/empty?topic=test&channel=ch", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, tc.path, "", tc.status, errBody(tc.code))
		})
	}

	mustPost(t, n, "/topic/create?topic=test", "", "")
	expectV1(t, n, http.MethodPost, "/channel/empty?topic=test&channel=ch", "", http.StatusNotFound, errBody("CHANNEL_NOT_FOUND"))

	mustPost(t, n, "/channel/create?topic=test&channel=ch", "", "")
	mustPost(t, n, "/mpub?topic=test", "a\nb\nc", "OK")
	waitChannelDepth(t, n, "test", "ch", 3)
	expectV1(t, n, http.MethodPost, "/channel/empty?topic=test&channel=ch", "", http.StatusOK, "")
	waitChannelDepth(t, n, "test", "ch", 0)
}

func TestInfo(t *testing.T) {
	n := testnode.Start(t)
	var info struct {
		Version          string `json:"version"`
		BroadcastAddress string `json:"broadcast_address"`
		TCPPort          int    `json:"tcp_port"`
		HTTPPort         int    `json:"http_port"`
		StartTime        int64  `json:"start_time"`
	}
	getJSON(t, n, "/info", &info)
	if info.Version != node.Version {
		t.Errorf("version %q, want %q", info.Version, node.Version)
	}
	if info.BroadcastAddress != "127.0.0.1" {
		t.Errorf("broadcast_address %q, want the host of --tcp-address", info.BroadcastAddress)
	}
	if want := port(t, n.TCPAddr()); info.TCPPort != want {
		t.Errorf("tcp_port %d, want %d", info.TCPPort, want)
	}
	if want := port(t, n.HTTPAddr()); info.HTTPPort != want {
		t.Errorf("http_port %d, want %d", info.HTTPPort, want)
	}
	if info.StartTime <= 0 {
		t.Errorf("start_time %d", info.StartTime)
	}
}

func port(t testing.TB, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
