package httpapi_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

const (
	v1Header = "nsq; version=1.0"
	waitFor  = 10 * time.Second
)

// errBody is nsqd's V1 error body for code.
func errBody(code string) string { return `{"message":"` + code + `"}` }

type answer struct {
	status int
	header http.Header
	body   string
}

// call makes one request to the node's HTTP API.
func call(t testing.TB, n *testnode.Node, method, pathAndQuery, body string) answer {
	t.Helper()
	return callWith(t, n, method, pathAndQuery, body, nil)
}

// callWith is call with these request headers.
func callWith(t testing.TB, n *testnode.Node, method, pathAndQuery, body string, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequest(method, n.URL(pathAndQuery), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// expectV1 requires a V1 answer with the given status and exact body.
func expectV1(t testing.TB, n *testnode.Node, method, pathAndQuery, body string, status int, want string) {
	t.Helper()
	a := call(t, n, method, pathAndQuery, body)
	if a.status != status || a.body != want {
		t.Fatalf("%s %s: got %d %q, want %d %q", method, pathAndQuery, a.status, a.body, status, want)
	}
	if got := a.header.Get("X-NSQ-Content-Type"); got != v1Header {
		t.Fatalf("%s %s: X-NSQ-Content-Type %q, want %q", method, pathAndQuery, got, v1Header)
	}
}

// mustPost requires a 200 with the given body.
func mustPost(t testing.TB, n *testnode.Node, pathAndQuery, body, want string) {
	t.Helper()
	if status, got := n.Post(t, pathAndQuery, body); status != http.StatusOK || got != want {
		t.Fatalf("POST %s: got %d %q, want 200 %q", pathAndQuery, status, got, want)
	}
}

// getJSON requires a 200 and decodes the body into v.
func getJSON(t testing.TB, n *testnode.Node, pathAndQuery string, v any) {
	t.Helper()
	status, body := n.Get(t, pathAndQuery)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", pathAndQuery, status, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v in %s", pathAndQuery, err, body)
	}
}

// The parts of /stats?format=json the tests read.
type statsDoc struct {
	Version   string          `json:"version"`
	Health    string          `json:"health"`
	StartTime int64           `json:"start_time"`
	Topics    []topicStats    `json:"topics"`
	Memory    json.RawMessage `json:"memory"`
	Producers []clientStats   `json:"producers"`
}

type topicStats struct {
	TopicName      string         `json:"topic_name"`
	TopicPartition string         `json:"topic_partition"`
	IsLeader       bool           `json:"is_leader"`
	Channels       []channelStats `json:"channels"`
	Depth          int64          `json:"depth"`
	MessageCount   int64          `json:"message_count"`
	Paused         bool           `json:"paused"`
}

type channelStats struct {
	ChannelName   string        `json:"channel_name"`
	Depth         int64         `json:"depth"`
	InFlightCount int           `json:"in_flight_count"`
	DeferredCount int           `json:"deferred_count"`
	RequeueCount  int64         `json:"requeue_count"`
	TimeoutCount  int64         `json:"timeout_count"`
	ClientCount   int           `json:"client_count"`
	Clients       []clientStats `json:"clients"`
	Paused        bool          `json:"paused"`
	MaxAttempts   int           `json:"max_attempts"`
	DeadLettered  int64         `json:"dead_lettered_count"`
}

type clientStats struct {
	InFlightCount int64 `json:"in_flight_count"`
}

func getStats(t testing.TB, n *testnode.Node, query string) statsDoc {
	t.Helper()
	var doc statsDoc
	getJSON(t, n, "/stats?format=json&"+query, &doc)
	return doc
}

// partitionStats are a topic's per-partition entries.
func partitionStats(t testing.TB, n *testnode.Node, topic string) []topicStats {
	t.Helper()
	return getStats(t, n, "include_mem=false&topic="+url.QueryEscape(topic)).Topics
}

// topicDepth sums a topic's depth over its partitions.
func topicDepth(t testing.TB, n *testnode.Node, topic string) int64 {
	t.Helper()
	return topicTotal(t, n, topic, func(ts topicStats) int64 { return ts.Depth })
}

// topicTotal sums a counter of a topic over its partitions.
func topicTotal(t testing.TB, n *testnode.Node, topic string, counter func(topicStats) int64) int64 {
	t.Helper()
	var total int64
	for _, ts := range partitionStats(t, n, topic) {
		total += counter(ts)
	}
	return total
}

// channelTotals sums a channel's counters over the topic's partitions; paused
// holds only if every partition's channel is paused.
func channelTotals(t testing.TB, n *testnode.Node, topic, channel string) (channelStats, bool) {
	t.Helper()
	total := channelStats{ChannelName: channel, Paused: true}
	found := false
	for _, ts := range partitionStats(t, n, topic) {
		for _, cs := range ts.Channels {
			if cs.ChannelName != channel {
				continue
			}
			found = true
			total.Depth += cs.Depth
			total.InFlightCount += cs.InFlightCount
			total.DeferredCount += cs.DeferredCount
			total.RequeueCount += cs.RequeueCount
			total.TimeoutCount += cs.TimeoutCount
			total.ClientCount = max(total.ClientCount, cs.ClientCount)
			total.Clients = append(total.Clients, cs.Clients...)
			total.Paused = total.Paused && cs.Paused
			total.MaxAttempts = cs.MaxAttempts
			total.DeadLettered += cs.DeadLettered
		}
	}
	if !found {
		total.Paused = false
	}
	return total, found
}

func waitTopicDepth(t testing.TB, n *testnode.Node, topic string, want int64) {
	t.Helper()
	var got int64
	eventually(t, "topic "+topic+" depth", func() bool {
		got = topicDepth(t, n, topic)
		return got == want
	}, func() any { return got })
}

// waitChannel waits until cond holds for the channel's totals.
func waitChannel(t testing.TB, n *testnode.Node, topic, channel, what string, cond func(channelStats) bool) {
	t.Helper()
	var last channelStats
	eventually(t, topic+"/"+channel+" "+what, func() bool {
		cs, ok := channelTotals(t, n, topic, channel)
		last = cs
		return ok && cond(cs)
	}, func() any { return last })
}

// eventually is testnode.Eventually that shows the last value seen when it
// gives up.
func eventually(t testing.TB, what string, cond func() bool, last func() any) {
	t.Helper()
	done := false
	defer func() {
		if !done {
			t.Logf("last seen: %+v", last())
		}
	}()
	testnode.Eventually(t, waitFor, what, cond)
	done = true
}

func waitChannelDepth(t testing.TB, n *testnode.Node, topic, channel string, want int64) {
	t.Helper()
	waitChannel(t, n, topic, channel, "depth", func(cs channelStats) bool { return cs.Depth == want })
}

// rawConsumer is a hand-driven NSQ TCP connection, for tests that need
// messages to stay in flight or to be requeued at a chosen moment.
type rawConsumer struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
}

// subscribe connects, IDENTIFYs with identify (if not nil), SUBs to every
// partition of topic and sends RDY.
func subscribe(t testing.TB, n *testnode.Node, topic, channel string, identify map[string]any, rdy int) *rawConsumer {
	t.Helper()
	c := dial(t, n, identify)
	c.subscribe(nsq.Subscribe(topic, channel), rdy)
	return c
}

// subscribePartition is SUB topic channel partition, one partition only.
func subscribePartition(t testing.TB, n *testnode.Node, topic, channel string, partition int, identify map[string]any, rdy int) *rawConsumer {
	t.Helper()
	c := dial(t, n, identify)
	c.subscribe(&nsq.Command{Name: []byte("SUB"), Params: [][]byte{[]byte(topic), []byte(channel), []byte(strconv.Itoa(partition))}}, rdy)
	return c
}

func dial(t testing.TB, n *testnode.Node, identify map[string]any) *rawConsumer {
	t.Helper()
	conn, err := net.DialTimeout("tcp", n.TCPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawConsumer{t: t, conn: conn, r: bufio.NewReader(conn)}
	if _, err := conn.Write(nsq.MagicV2); err != nil {
		t.Fatal(err)
	}
	if identify != nil {
		cmd, err := nsq.Identify(identify)
		if err != nil {
			t.Fatal(err)
		}
		c.send(cmd)
		c.expectResponse()
	}
	return c
}

func (c *rawConsumer) subscribe(sub *nsq.Command, rdy int) {
	c.t.Helper()
	c.send(sub)
	c.expectResponse()
	c.send(nsq.Ready(rdy))
}

func (c *rawConsumer) send(cmd *nsq.Command) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := cmd.WriteTo(c.conn); err != nil {
		c.t.Fatal(err)
	}
}

// frame reads the next frame that is not a heartbeat.
func (c *rawConsumer) frame() (int32, []byte) {
	c.t.Helper()
	for {
		c.conn.SetReadDeadline(time.Now().Add(waitFor))
		typ, data, err := nsq.ReadUnpackedResponse(c.r)
		if err != nil {
			c.t.Fatalf("reading a frame: %v", err)
		}
		if typ == nsq.FrameTypeResponse && string(data) == "_heartbeat_" {
			c.send(nsq.Nop())
			continue
		}
		return typ, data
	}
}

func (c *rawConsumer) expectResponse() {
	c.t.Helper()
	if typ, data := c.frame(); typ != nsq.FrameTypeResponse {
		c.t.Fatalf("got frame type %d %q, want a response", typ, data)
	}
}

func (c *rawConsumer) message() *nsq.Message {
	c.t.Helper()
	typ, data := c.frame()
	if typ != nsq.FrameTypeMessage {
		c.t.Fatalf("got frame type %d %q, want a message", typ, data)
	}
	m, err := nsq.DecodeMessage(data)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// newConsumer is a go-nsq consumer whose logging is dropped: its goroutines
// may log after the test has ended, when t.Log would panic.
func newConsumer(t testing.TB, topic, channel string, cfg *nsq.Config, h nsq.Handler) *nsq.Consumer {
	t.Helper()
	if cfg == nil {
		cfg = nsq.NewConfig()
	}
	c, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
	c.AddHandler(h)
	t.Cleanup(func() {
		c.Stop()
		<-c.StopChan
	})
	return c
}
