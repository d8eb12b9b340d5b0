package protocol_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// frameWait bounds every read that expects a frame; a frame that is due
// arrives within milliseconds, so this only matters when something is broken.
const frameWait = 10 * time.Second

// startNode runs a real node for one test.
func startNode(t *testing.T, extra ...string) *testnode.Node {
	t.Helper()
	return testnode.Start(t, extra...)
}

// client is a raw NSQ V2 connection, the way nsqd's own tests talk to the
// server: whole commands out, whole frames in, nothing hidden.
type client struct {
	t     *testing.T
	conn  net.Conn
	r     io.Reader    // frames come from here: the socket, or a decompressor over it
	w     io.Writer    // commands go here
	flush func() error // pushes w's buffered bytes out after a compression upgrade
}

// dial connects to n's TCP port and sends the V2 magic.
func dial(t *testing.T, n *testnode.Node) *client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", n.TCPAddr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &client{t: t, conn: conn, r: bufio.NewReader(conn), w: conn}
	c.write([]byte(protocol.MagicV2))
	return c
}

// command encodes one command line, with a size-prefixed body when body is
// not nil (an empty, non-nil body is sent as size 0).
func command(line string, body []byte) []byte {
	b := []byte(line + "\n")
	if body != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
		b = append(b, body...)
	}
	return b
}

// mpubBody is an MPUB body without its outer size: count, then each message
// size-prefixed.
func mpubBody(bodies ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(bodies)))
	for _, m := range bodies {
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return b
}

func (c *client) write(b []byte) {
	c.t.Helper()
	c.conn.SetWriteDeadline(time.Now().Add(frameWait))
	if _, err := c.w.Write(b); err != nil {
		c.t.Fatalf("writing %q: %v", short(b), err)
	}
	if c.flush != nil {
		if err := c.flush(); err != nil {
			c.t.Fatalf("flushing %q: %v", short(b), err)
		}
	}
}

// send writes one command.
func (c *client) send(line string, body []byte) {
	c.t.Helper()
	c.write(command(line, body))
}

// tryFrame reads one frame, waiting at most d.
func (c *client) tryFrame(d time.Duration) (int32, []byte, error) {
	c.conn.SetReadDeadline(time.Now().Add(d))
	return protocol.ReadFrame(c.r)
}

// frame reads the next frame other than a heartbeat.
func (c *client) frame() (int32, []byte) {
	c.t.Helper()
	for {
		ft, data, err := c.tryFrame(frameWait)
		if err != nil {
			c.t.Fatalf("reading a frame: %v", err)
		}
		if !isHeartbeat(ft, data) {
			return ft, data
		}
	}
}

func isHeartbeat(ft int32, data []byte) bool {
	return ft == protocol.FrameTypeResponse && string(data) == protocol.ResponseHeartbeat
}

// frameIs reads one frame and checks its type and data.
func (c *client) frameIs(wantType int32, want string) {
	c.t.Helper()
	ft, data := c.frame()
	if ft != wantType || string(data) != want {
		c.t.Fatalf("frame = type %d %q, want type %d %q", ft, short(data), wantType, want)
	}
}

func (c *client) response(want string) {
	c.t.Helper()
	c.frameIs(protocol.FrameTypeResponse, want)
}

func (c *client) errorFrame(want string) {
	c.t.Helper()
	c.frameIs(protocol.FrameTypeError, want)
}

// fatal expects the error frame of a fatal error, then the server closing
// the connection.
func (c *client) fatal(want string) {
	c.t.Helper()
	c.errorFrame(want)
	c.closedByServer()
}

func (c *client) message() protocol.Message {
	c.t.Helper()
	ft, data := c.frame()
	if ft != protocol.FrameTypeMessage {
		c.t.Fatalf("frame = type %d %q, want a message", ft, short(data))
	}
	m, err := protocol.DecodeMessage(data)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// closedByServer reads until the server ends the connection. Heartbeats may
// come first; any other frame is a failure.
func (c *client) closedByServer() {
	c.t.Helper()
	for {
		ft, data, err := c.tryFrame(frameWait)
		if err == nil {
			if isHeartbeat(ft, data) {
				continue
			}
			c.t.Fatalf("got type %d %q, want the connection closed", ft, short(data))
		}
		if !isClosed(err) {
			c.t.Fatalf("want the connection closed, got %v", err)
		}
		return
	}
}

func isClosed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// nothingFor checks that no frame arrives for d. The connection stays usable:
// a read timeout before any byte arrived loses nothing.
func (c *client) nothingFor(d time.Duration) {
	c.t.Helper()
	ft, data, err := c.tryFrame(d)
	if err == nil {
		c.t.Fatalf("got type %d %q, want nothing for %v", ft, short(data), d)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		c.t.Fatalf("want nothing for %v, got %v", d, err)
	}
}

// identify sends IDENTIFY with fields as JSON and returns the answer.
func (c *client) identify(fields map[string]any) (int32, []byte) {
	c.t.Helper()
	body, err := json.Marshal(fields)
	if err != nil {
		c.t.Fatal(err)
	}
	c.send("IDENTIFY", body)
	return c.frame()
}

// negotiate sends IDENTIFY with feature negotiation and decodes the JSON.
func (c *client) negotiate(fields map[string]any) identifyResponse {
	c.t.Helper()
	fields["feature_negotiation"] = true
	ft, data := c.identify(fields)
	if ft != protocol.FrameTypeResponse {
		c.t.Fatalf("IDENTIFY answered type %d %q", ft, data)
	}
	var r identifyResponse
	if err := json.Unmarshal(data, &r); err != nil {
		c.t.Fatalf("IDENTIFY answer %q: %v", data, err)
	}
	return r
}

type identifyResponse struct {
	MaxRdyCount         int64 `json:"max_rdy_count"`
	MsgTimeout          int64 `json:"msg_timeout"`
	Deflate             bool  `json:"deflate"`
	DeflateLevel        int   `json:"deflate_level"`
	Snappy              bool  `json:"snappy"`
	SampleRate          int32 `json:"sample_rate"`
	OutputBufferSize    int64 `json:"output_buffer_size"`
	OutputBufferTimeout int64 `json:"output_buffer_timeout"`
}

func (c *client) sub(topic, channel string) {
	c.t.Helper()
	c.send("SUB "+topic+" "+channel, nil)
	c.response(protocol.ResponseOK)
}

func (c *client) rdy(n int) {
	c.t.Helper()
	c.send("RDY "+strconv.Itoa(n), nil)
}

func (c *client) pub(topic string, body []byte) {
	c.t.Helper()
	c.send("PUB "+topic, body)
	c.response(protocol.ResponseOK)
}

// consumer connects, IDENTIFYs with defaults, subscribes and opens a window.
func consumer(t *testing.T, n *testnode.Node, topic, channel string, rdy int) *client {
	t.Helper()
	c := dial(t, n)
	c.identify(map[string]any{})
	c.sub(topic, channel)
	if rdy > 0 {
		c.rdy(rdy)
	}
	return c
}

// publish PUBs each body to topic on a connection of its own.
func publish(t *testing.T, n *testnode.Node, topic string, bodies ...string) {
	t.Helper()
	p := dial(t, n)
	for _, b := range bodies {
		p.pub(topic, []byte(b))
	}
	p.conn.Close()
}

func idText(id uint64) string {
	b := make([]byte, protocol.MsgIDLength)
	protocol.FormatMessageID(b, id)
	return string(b)
}

func short(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}

// chanStats is a channel's counters from /stats, summed over the topic's
// partitions (the node reports one topic entry per partition).
type chanStats struct {
	Depth, InFlight, Deferred, Messages, Requeues, Timeouts, Clients int64
	Paused                                                           bool
	ClientInFlight                                                   []int64
	ClientFinished                                                   []int64
}

type statsJSON struct {
	Topics []struct {
		Name      string `json:"topic_name"`
		Partition string `json:"topic_partition"`
		Messages  int64  `json:"message_count"`
		Channels  []struct {
			Name     string `json:"channel_name"`
			Depth    int64  `json:"depth"`
			InFlight int64  `json:"in_flight_count"`
			Deferred int64  `json:"deferred_count"`
			Messages int64  `json:"message_count"`
			Requeues int64  `json:"requeue_count"`
			Timeouts int64  `json:"timeout_count"`
			Clients  int64  `json:"client_count"`
			Paused   bool   `json:"paused"`
			Conns    []struct {
				InFlight int64 `json:"in_flight_count"`
				Finished int64 `json:"finish_count"`
			} `json:"clients"`
		} `json:"channels"`
	} `json:"topics"`
}

func stats(t *testing.T, n *testnode.Node, topic string) statsJSON {
	t.Helper()
	code, body := n.Get(t, "/stats?format=json&topic="+url.QueryEscape(topic))
	if code != 200 {
		t.Fatalf("/stats: %d %s", code, body)
	}
	var s statsJSON
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/stats: %v in %s", err, body)
	}
	return s
}

func channelStats(t *testing.T, n *testnode.Node, topic, channel string) chanStats {
	t.Helper()
	var cs chanStats
	for _, tp := range stats(t, n, topic).Topics {
		for _, ch := range tp.Channels {
			if tp.Name != topic || ch.Name != channel {
				continue
			}
			cs.Depth += ch.Depth
			cs.InFlight += ch.InFlight
			cs.Deferred += ch.Deferred
			cs.Messages += ch.Messages
			cs.Requeues += ch.Requeues
			cs.Timeouts += ch.Timeouts
			cs.Clients = max(cs.Clients, ch.Clients)
			cs.Paused = cs.Paused || ch.Paused
			if cs.ClientInFlight == nil {
				for _, c := range ch.Conns {
					cs.ClientInFlight = append(cs.ClientInFlight, c.InFlight)
					cs.ClientFinished = append(cs.ClientFinished, c.Finished)
				}
			}
		}
	}
	return cs
}

// waitStats polls the channel's counters until cond holds.
func waitStats(t *testing.T, n *testnode.Node, topic, channel, what string, cond func(chanStats) bool) chanStats {
	t.Helper()
	var cs chanStats
	testnode.Eventually(t, frameWait, fmt.Sprintf("%s on %s/%s", what, topic, channel), func() bool {
		cs = channelStats(t, n, topic, channel)
		return cond(cs)
	})
	return cs
}
