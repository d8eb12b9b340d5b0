package protocol_test

// One test per behaviour nsqd's protocol_v2_test.go asserts, run against a
// real node over TCP. Timing-dependent ones are in nsqd_timing_test.go,
// compression in nsqd_compress_test.go.

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

func TestChannelTopicNames(t *testing.T) {
	n := startNode(t)
	cases := []struct {
		name  string
		valid bool
	}{
		{"test", true},
		{"test-with_period.", true},
		{"test#ephemeral", true},
		{"test:ephemeral", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := dial(t, n)
			p.send("PUB "+tc.name, []byte("x"))
			if tc.valid {
				p.response(protocol.ResponseOK)
			} else {
				p.fatal(fmt.Sprintf(`E_BAD_TOPIC PUB topic name %q is not valid`, tc.name))
			}

			c := dial(t, n)
			c.identify(map[string]any{})
			c.send("SUB valid "+tc.name, nil)
			if tc.valid {
				c.response(protocol.ResponseOK)
			} else {
				c.fatal(fmt.Sprintf(`E_BAD_CHANNEL SUB channel name %q is not valid`, tc.name))
			}
		})
	}
}

func TestBasicV2(t *testing.T) {
	n := startNode(t)
	publish(t, n, "basic", "test body")

	c := consumer(t, n, "basic", "ch", 1)
	m := c.message()
	if string(m.Body) != "test body" || m.Attempts != 1 {
		t.Fatalf("got body %q attempts %d, want %q attempts 1", m.Body, m.Attempts, "test body")
	}
	c.send("FIN "+idText(m.ID), nil)
	waitStats(t, n, "basic", "ch", "FIN", func(s chanStats) bool { return s.InFlight == 0 && s.Depth == 0 })
}

func TestMultipleConsumerV2(t *testing.T) {
	n := startNode(t)
	// Both channels exist before the publish, so each gets a copy.
	c1 := consumer(t, n, "fanout", "ch1", 0)
	c2 := consumer(t, n, "fanout", "ch2", 0)
	publish(t, n, "fanout", "fan out")
	c1.rdy(1)
	c2.rdy(1)
	m1, m2 := c1.message(), c2.message()
	for _, m := range []protocol.Message{m1, m2} {
		if string(m.Body) != "fan out" || m.Attempts != 1 {
			t.Fatalf("got body %q attempts %d, want %q attempts 1", m.Body, m.Attempts, "fan out")
		}
	}
	if m1.ID != m2.ID {
		t.Fatalf("channels got IDs %x and %x, want the same message", m1.ID, m2.ID)
	}
}

func TestEmptyCommand(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	c.write([]byte("\n\n"))
	c.fatal("E_INVALID invalid command ")
	// The server survived it.
	publish(t, n, "after_empty", "still here")
}

func TestFatalError(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	c.send("ASDF", nil)
	c.fatal("E_INVALID invalid command ASDF")
}

// TestIOLoopReturnsClientErr: an invalid command ends the connection with
// its error, and ends it as well when the client is gone before the error
// frame can be written.
func TestIOLoopReturnsClientErr(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	c.identify(map[string]any{})
	c.send("INVALID_COMMAND", nil)
	c.fatal("E_INVALID invalid command INVALID_COMMAND")

	gone := dial(t, n)
	gone.write(command("INVALID_COMMAND", nil))
	gone.conn.Close()
	testnode.Eventually(t, frameWait, "every session ended", func() bool {
		_, body := n.Get(t, "/metrics")
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "partita_client_connections{") {
				return strings.HasSuffix(line, "} 0")
			}
		}
		return false
	})
}

func TestSizeLimits(t *testing.T) {
	n := startNode(t, "--max-msg-size", "100", "--max-body-size", "1000")
	msgs := func(count, size int) [][]byte {
		var out [][]byte
		for range count {
			out = append(out, bytes.Repeat([]byte("a"), size))
		}
		return out
	}
	withEmpty := append(msgs(5, 100), []byte{})
	cases := []struct {
		name, line string
		body       []byte
		want       string // "" for OK
	}{
		{"PUB at max", "PUB sizes", bytes.Repeat([]byte("a"), 100), ""},
		{"PUB over max", "PUB sizes", bytes.Repeat([]byte("a"), 105), "E_BAD_MESSAGE PUB message too big 105 > 100"},
		{"PUB empty", "PUB sizes", []byte{}, "E_BAD_MESSAGE PUB invalid message body size 0"},
		{"MPUB at max", "MPUB sizes", mpubBody(msgs(9, 100)...), ""},
		{"MPUB over max body", "MPUB sizes", mpubBody(msgs(11, 100)...), "E_BAD_BODY MPUB body too big 1148 > 1000"},
		{"MPUB empty member", "MPUB sizes", mpubBody(withEmpty...), "E_BAD_MESSAGE MPUB invalid message(5) body size 0"},
		{"MPUB member over max", "MPUB sizes", mpubBody(bytes.Repeat([]byte("a"), 101)), "E_BAD_MESSAGE MPUB message too big 101 > 100"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, n)
			c.send(tc.line, tc.body)
			if tc.want == "" {
				c.response(protocol.ResponseOK)
				return
			}
			c.fatal(tc.want)
		})
	}
}

func TestMaxRdyCount(t *testing.T) {
	n := startNode(t, "--max-rdy-count", "50")
	publish(t, n, "rdy", "m")

	c := dial(t, n)
	if r := c.negotiate(map[string]any{}); r.MaxRdyCount != 50 {
		t.Fatalf("IDENTIFY max_rdy_count = %d, want 50", r.MaxRdyCount)
	}
	c.sub("rdy", "ch")
	c.rdy(50)
	if m := c.message(); string(m.Body) != "m" {
		t.Fatalf("got %q", m.Body)
	}
	c.rdy(51)
	c.fatal("E_INVALID RDY count 51 out of range 0-50")
}

func TestBadFin(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "badfin", "ch", 0)
	c.send("FIN ", nil)
	c.fatal("E_INVALID invalid message ID")
}

func TestFinUnknownIDIsNotFatal(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "finunknown", "ch", 1)
	unknown := []uint64{
		0x0000ffffffffffff, // partition 0, never issued
		5<<50 | 1,          // a partition the topic does not have
	}
	for _, id := range unknown {
		c.send("FIN "+idText(id), nil)
		c.errorFrame("E_FIN_FAILED FIN " + idText(id) + " failed ID not in flight")
	}

	// The connection still consumes.
	publish(t, n, "finunknown", "after")
	if m := c.message(); string(m.Body) != "after" {
		t.Fatalf("got %q, want %q", m.Body, "after")
	}
}

func TestClientHeartbeatDisableSUB(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	c.identify(map[string]any{"heartbeat_interval": -1})
	c.send("SUB hb ch", nil)
	c.fatal("E_INVALID cannot SUB with heartbeats disabled")
}

func TestMaxHeartbeatInterval(t *testing.T) {
	n := startNode(t, "--max-heartbeat-interval", "300s")
	t.Run("valid", func(t *testing.T) {
		c := dial(t, n)
		ft, data := c.identify(map[string]any{"heartbeat_interval": 300000})
		if ft != protocol.FrameTypeResponse || string(data) != "OK" {
			t.Fatalf("IDENTIFY answered type %d %q, want OK", ft, data)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		c := dial(t, n)
		ft, data := c.identify(map[string]any{"heartbeat_interval": 300001})
		if ft != protocol.FrameTypeError || string(data) != "E_BAD_BODY IDENTIFY heartbeat interval (300001) is invalid" {
			t.Fatalf("IDENTIFY answered type %d %q", ft, data)
		}
		c.closedByServer()
	})
}

func TestOutputBufferingValidity(t *testing.T) {
	n := startNode(t, "--max-output-buffer-size", "524288", "--max-output-buffer-timeout", "1s")
	c := dial(t, n)
	// Several IDENTIFYs on one connection, each accepted.
	for _, v := range []int{0, -1} {
		ft, data := c.identify(map[string]any{"output_buffer_size": v, "output_buffer_timeout": v})
		if ft != protocol.FrameTypeResponse || string(data) != "OK" {
			t.Fatalf("IDENTIFY %d answered type %d %q, want OK", v, ft, data)
		}
	}
	r := c.negotiate(map[string]any{"output_buffer_size": 512 * 1024, "output_buffer_timeout": 1000})
	if r.OutputBufferSize != 512*1024 || r.OutputBufferTimeout != 1000 {
		t.Fatalf("IDENTIFY echoed size %d timeout %d", r.OutputBufferSize, r.OutputBufferTimeout)
	}

	bad := []struct {
		size, timeout int
		want          string
	}{
		{512*1024 + 1, 0, "E_BAD_BODY IDENTIFY output buffer size (524289) is invalid"},
		{0, 1001, "E_BAD_BODY IDENTIFY output buffer timeout (1001) is invalid"},
	}
	for _, b := range bad {
		c := dial(t, n)
		ft, data := c.identify(map[string]any{"output_buffer_size": b.size, "output_buffer_timeout": b.timeout})
		if ft != protocol.FrameTypeError || string(data) != b.want {
			t.Fatalf("IDENTIFY answered type %d %q, want %q", ft, data, b.want)
		}
		c.closedByServer()
	}
}

func TestPausing(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "pausing", "ch", 10)
	publish(t, n, "pausing", "before")
	m := c.message()
	c.send("FIN "+idText(m.ID), nil)

	post := func(path string) {
		if code, body := n.Post(t, path+"?topic=pausing&channel=ch", ""); code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	post("/channel/pause")
	waitStats(t, n, "pausing", "ch", "pause", func(s chanStats) bool { return s.Paused })
	publish(t, n, "pausing", "while paused")
	waitStats(t, n, "pausing", "ch", "message queued", func(s chanStats) bool { return s.Depth == 1 })
	c.nothingFor(300 * time.Millisecond)

	post("/channel/unpause")
	if m := c.message(); string(m.Body) != "while paused" {
		t.Fatalf("got %q after unpause", m.Body)
	}
}

func TestPipelinedPubsAnswerInOrder(t *testing.T) {
	n := startNode(t, "--max-msg-size", "100")
	c := dial(t, n)
	var all []byte
	for i := range 100 {
		all = append(all, command("PUB pipelined", []byte(fmt.Sprint(i)))...)
	}
	c.write(all)
	for range 100 {
		c.response(protocol.ResponseOK)
	}

	// The last answer is the error of the command that failed, after the
	// OKs of all those before it.
	var mixed []byte
	for i := range 10 {
		mixed = append(mixed, command("PUB pipelined", []byte(fmt.Sprint(i)))...)
	}
	mixed = append(mixed, command("PUB pipelined", bytes.Repeat([]byte("a"), 101))...)
	c = dial(t, n)
	c.write(mixed)
	for range 10 {
		c.response(protocol.ResponseOK)
	}
	c.fatal("E_BAD_MESSAGE PUB message too big 101 > 100")

	sub := consumer(t, n, "pipelined", "ch", 200)
	for i := range 110 {
		want := fmt.Sprint(i)
		if i >= 100 {
			want = fmt.Sprint(i - 100)
		}
		if m := sub.message(); string(m.Body) != want {
			t.Fatalf("message %d is %q, want %q", i, m.Body, want)
		}
	}
}

func TestMalformedCommandLeavesOtherConnectionsAlone(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "isolated", "ch", 100)
	publish(t, n, "isolated", "one")
	if m := c.message(); string(m.Body) != "one" {
		t.Fatalf("got %q", m.Body)
	}

	bad := dial(t, n)
	bad.write([]byte("PUB isolated\n\xff\xff\xff\xff"))
	bad.fatal("E_BAD_MESSAGE PUB invalid message body size -1")

	publish(t, n, "isolated", "two", "three")
	for _, want := range []string{"two", "three"} {
		if m := c.message(); string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
	}
}

func TestMaxChannelConsumers(t *testing.T) {
	n := startNode(t, "--max-channel-consumers", "2")
	first := consumer(t, n, "limited", "ch", 0)
	consumer(t, n, "limited", "ch", 0)

	third := dial(t, n)
	third.identify(map[string]any{})
	third.send("SUB limited ch", nil)
	ft, data := third.frame()
	if ft != protocol.FrameTypeError || !strings.HasPrefix(string(data), "E_SUB_FAILED SUB failed ") {
		t.Fatalf("third SUB answered type %d %q, want E_SUB_FAILED", ft, data)
	}
	third.closedByServer()

	// Another channel of the topic has its own limit.
	consumer(t, n, "limited", "other", 0)

	// A consumer leaving makes room.
	first.conn.Close()
	testnode.Eventually(t, frameWait, "a SUB accepted after a consumer left", func() bool {
		c := dial(t, n)
		defer c.conn.Close()
		c.identify(map[string]any{})
		c.send("SUB limited ch", nil)
		ft, data := c.frame()
		return ft == protocol.FrameTypeResponse && string(data) == protocol.ResponseOK
	})
}

func TestChannelEmptyConsumer(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "emptied", "ch", 25)
	var bodies []string
	for i := range 25 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	publish(t, n, "emptied", bodies...)
	var ids []uint64
	for range 25 {
		ids = append(ids, c.message().ID)
	}
	waitStats(t, n, "emptied", "ch", "25 in flight", func(s chanStats) bool {
		return s.InFlight == 25 && len(s.ClientInFlight) == 1 && s.ClientInFlight[0] == 25
	})

	if code, body := n.Post(t, "/channel/empty?topic=emptied&channel=ch", ""); code != 200 {
		t.Fatalf("/channel/empty: %d %s", code, body)
	}
	waitStats(t, n, "emptied", "ch", "in flight reset", func(s chanStats) bool {
		return s.InFlight == 0 && s.Depth == 0 && len(s.ClientInFlight) == 1 && s.ClientInFlight[0] == 0
	})
	c.send("FIN "+idText(ids[0]), nil)
	c.errorFrame("E_FIN_FAILED FIN " + idText(ids[0]) + " failed ID not in flight")

	// The client's whole window is open again.
	var more []string
	for i := range 25 {
		more = append(more, fmt.Sprint("more ", i))
	}
	publish(t, n, "emptied", more...)
	for _, want := range more {
		if m := c.message(); string(m.Body) != want {
			t.Fatalf("got %q, want %q", m.Body, want)
		}
	}
}

// Bad input of every kind gets nsqd's error code and closes only its own
// connection; a consumer on another connection keeps receiving.
func TestBadInputClosesOnlyItsConnection(t *testing.T) {
	n := startNode(t, "--max-msg-size", "100")
	c := consumer(t, n, "sturdy", "ch", 100)
	cases := []struct {
		name  string
		input []byte
		want  string
	}{
		{"bad IDENTIFY JSON", command("IDENTIFY", []byte("{not json")), "E_BAD_BODY IDENTIFY failed to decode JSON body"},
		{"bad topic name", command("PUB bad:topic", []byte("x")), `E_BAD_TOPIC PUB topic name "bad:topic" is not valid`},
		{"bad channel name", []byte("SUB sturdy bad:channel\n"), `E_BAD_CHANNEL SUB channel name "bad:channel" is not valid`},
		{"oversized body", command("PUB sturdy", make([]byte, 101)), "E_BAD_MESSAGE PUB message too big 101 > 100"},
		{"unknown command", []byte("WHAT\n"), "E_INVALID invalid command WHAT"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := dial(t, n)
			bad.write(tc.input)
			bad.fatal(tc.want)
			body := fmt.Sprint("after-", i)
			publish(t, n, "sturdy", body)
			if m := c.message(); string(m.Body) != body {
				t.Fatalf("consumer got %q, want %q", m.Body, body)
			}
		})
	}
}

// A consumer subscribing to an ephemeral channel the moment its last
// consumer left is answered OK and gets what is published next, on a
// normal topic and on an ephemeral one, which goes with its last channel.
// The channel is made anew once the old one's actor is gone, where the SUB
// was refused (E_SUB_FAILED) about one time in twenty-five while that
// actor still held the name; a subscription that opened the channel while
// the last consumer's leave dropped it opens it again, where it was cut
// off (the connection closed) or attached to the dropped channel's actors
// and got nothing, about one time in fifteen; and one that opened an
// ephemeral topic going away subscribes to the topic made anew, where it
// failed or got nothing nearly every time.
func TestEphemeralChannelSubscribedAgainAtOnce(t *testing.T) {
	for _, topicName := range []string{"eph", "eph#ephemeral"} {
		t.Run(topicName, func(t *testing.T) {
			n := startNode(t)
			for i := range 100 {
				leaving := dial(t, n)
				leaving.sub(topicName, "c#ephemeral")
				leaving.conn.Close()
				next := dial(t, n)
				next.send("SUB "+topicName+" c#ephemeral", nil)
				if ft, body := next.frame(); ft != protocol.FrameTypeResponse || string(body) != "OK" {
					t.Fatalf("SUB %d just after the last consumer left: %d %s", i, ft, body)
				}
				next.rdy(1)
				body := fmt.Sprint("published after SUB ", i)
				publish(t, n, topicName, body)
				// The previous consumer, its connection closing with RDY 1,
				// may have been sent it first: the attempt count may be 2.
				if m := next.message(); string(m.Body) != body {
					t.Fatalf("SUB %d got %q, want %q", i, m.Body, body)
				} else {
					next.send("FIN "+idText(m.ID), nil)
				}
				next.conn.Close()
			}
		})
	}
}

// An ephemeral topic goes with its last channel also when that channel was
// deleted through the API under its consumer: the consumer is
// disconnected, and its leave takes the topic.
func TestEphemeralTopicGoesWhenItsChannelIsDeletedUnderItsConsumer(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "gone#ephemeral", "c#ephemeral", 0)
	if code, body := n.Post(t, "/channel/delete?topic=gone%23ephemeral&channel=c%23ephemeral", ""); code != 200 {
		t.Fatalf("channel delete: %d %s", code, body)
	}
	c.closedByServer()
	testnode.Eventually(t, 10*time.Second, "the ephemeral topic gone", func() bool {
		_, body := n.Get(t, "/stats?format=json")
		return !strings.Contains(body, "gone#ephemeral")
	})
}
