package protocol_test

import (
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
	"github.com/partitamq/partita/storage"
)

// youzanMessage reads a message frame as youzan's go-nsq decodes it: the
// header section when the connection is ext-aware on an ext topic (ext),
// then the 8-byte offset and 4-byte size when it consumes ordered or traced
// (detail).
func (c *client) youzanMessage(ext, detail bool) protocol.MessageFrame {
	c.t.Helper()
	ft, data := c.frame()
	if ft != protocol.FrameTypeMessage {
		c.t.Fatalf("frame = type %d %q, want a message", ft, short(data))
	}
	m, err := protocol.DecodeExtendedMessage(data, ext, detail)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// SUB_ORDERED and SUB_ADVANCED consumers get youzan's frame: the queue
// offset and the size in the log between the ID and the body, big-endian,
// byte for byte; a SUB consumer of the same messages gets NSQ's frame.
func TestYouzanOrderedAndTracedFrames(t *testing.T) {
	n := startNode(t)
	if code, body := n.Post(t, "/topic/create?topic=yzframe&partition_num=1", ""); code != 200 {
		t.Fatalf("/topic/create: %d %s", code, body)
	}
	for _, ch := range []string{"ord", "adv", "plain"} {
		if code, body := n.Post(t, "/channel/create?topic=yzframe&channel="+ch, ""); code != 200 {
			t.Fatalf("/channel/create: %d %s", code, body)
		}
	}
	bodies := []string{"first", "second message", "3"}
	publish(t, n, "yzframe", bodies...)

	var offsets []int64
	var sizes []int32
	off := int64(0)
	for _, b := range bodies {
		size := int32(storage.EncodedSize(&storage.Message{Body: []byte(b)}))
		offsets, sizes = append(offsets, off), append(sizes, size)
		off += int64(size)
	}

	for _, sub := range []string{"SUB_ORDERED yzframe ord 0", "SUB_ADVANCED yzframe adv 0"} {
		c := dial(t, n)
		c.identify(map[string]any{})
		c.send(sub, nil)
		c.response(protocol.ResponseOK)
		c.rdy(1)
		for i, want := range bodies {
			ft, data := c.frame()
			if ft != protocol.FrameTypeMessage {
				t.Fatalf("%s: frame %d %q", sub, ft, short(data))
			}
			// timestamp 8, attempts 2, ID 16, then offset 8 and size 4.
			const at = 8 + 2 + protocol.MsgIDLength
			if len(data) != at+12+len(want) {
				t.Fatalf("%s: message %d is %d bytes, want %d", sub, i, len(data), at+12+len(want))
			}
			gotOff := int64(binary.BigEndian.Uint64(data[at:]))
			gotSize := int32(binary.BigEndian.Uint32(data[at+8:]))
			if gotOff != offsets[i] || gotSize != sizes[i] || string(data[at+12:]) != want {
				t.Fatalf("%s: message %d = offset %d size %d body %q, want %d %d %q",
					sub, i, gotOff, gotSize, data[at+12:], offsets[i], sizes[i], want)
			}
			c.send("FIN "+string(data[10:at]), nil)
		}
	}

	plain := consumer(t, n, "yzframe", "plain", 10)
	for _, want := range bodies {
		if m := plain.message(); string(m.Body) != want {
			t.Fatalf("SUB consumer got %q, want %q", m.Body, want)
		}
	}
}

// extBody is youzan's PUB_EXT body: the header's 2-byte length, the header
// and the message.
func extBody(header, body string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(header)))
	return append(append(b, header...), body...)
}

// createExt makes a one-partition ext topic with the given channels.
func createExt(t *testing.T, n *testnode.Node, topic string, channels ...string) {
	t.Helper()
	if code, body := n.Post(t, "/topic/create?topic="+topic+"&partition_num=1&extend=true", ""); code != 200 {
		t.Fatalf("/topic/create: %d %s", code, body)
	}
	for _, ch := range channels {
		if code, body := n.Post(t, "/channel/create?topic="+topic+"&channel="+ch, ""); code != 200 {
			t.Fatalf("/channel/create: %d %s", code, body)
		}
	}
}

// PUB_EXT and MPUB_EXT store headers with the messages of an ext topic; a
// consumer that IDENTIFYed with extend_support reads them in youzan's frame
// (byte for byte), also after SUB_ORDERED's offset and size; a plain
// consumer of the same topic gets the bodies alone.
func TestYouzanHeadersRoundTrip(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "ext", "aware", "ord", "plain")
	p := dial(t, n)
	p.send("PUB_EXT ext 0", extBody(`{"k":"v"}`, "one"))
	p.response(protocol.ResponseOK)
	p.send("MPUB_EXT ext", mpubBody(extBody(`{"n":2}`, "two"), extBody("", "three")))
	p.response(protocol.ResponseOK)
	p.pub("ext", []byte("four"))
	p.send("PUB_EXT ext", extBody(`{"##trace_id":"77","k":"t"}`, "five"))
	if ok := p.tracedOK(); ok.trace != 77 {
		t.Fatalf("PUB_EXT with a trace ID answered %+v", ok)
	}
	want := []struct{ header, body string }{{`{"k":"v"}`, "one"}, {`{"n":2}`, "two"}, {"", "three"}, {"", "four"}, {`{"##trace_id":"77","k":"t"}`, "five"}}

	aware := dial(t, n)
	aware.identify(map[string]any{"extend_support": true})
	aware.sub("ext", "aware")
	aware.rdy(10)
	for i, w := range want {
		ft, data := aware.frame()
		if ft != protocol.FrameTypeMessage {
			t.Fatalf("frame %d %q", ft, short(data))
		}
		const at = 8 + 2 + protocol.MsgIDLength
		var ext []byte
		if w.header == "" {
			ext = []byte{0}
		} else {
			ext = append([]byte{4}, binary.BigEndian.AppendUint16(nil, uint16(len(w.header)))...)
			ext = append(ext, w.header...)
		}
		if got := data[at:]; string(got) != string(ext)+w.body {
			t.Fatalf("message %d after its ID = %q, want %q", i, got, string(ext)+w.body)
		}
	}

	ord := dial(t, n)
	ord.identify(map[string]any{"extend_support": true})
	ord.send("SUB_ORDERED ext ord 0", nil)
	ord.response(protocol.ResponseOK)
	ord.rdy(1)
	var off int64
	for i, w := range want {
		m := ord.youzanMessage(true, true)
		size := int32(storage.EncodedSize(&storage.Message{Header: []byte(w.header), Body: []byte(w.body)}))
		if w.body == "five" {
			size += 8 // the trace ID
		}
		if string(m.Header) != w.header || string(m.Body) != w.body || m.Offset != off || m.RawSize != size {
			t.Fatalf("ordered message %d = %q %q at %d size %d, want %q %q at %d size %d",
				i, m.Header, m.Body, m.Offset, m.RawSize, w.header, w.body, off, size)
		}
		off += int64(size)
		ord.send("FIN "+idText(m.ID), nil)
	}

	plain := consumer(t, n, "ext", "plain", 10)
	for _, w := range want {
		if m := plain.message(); string(m.Body) != w.body {
			t.Fatalf("plain consumer got %q, want %q", m.Body, w.body)
		}
	}
}

// Headers are refused where youzan refuses them, with its codes: on a topic
// that is not ext, when not a JSON object, with a trace ID that is not a
// decimal string; a header of 65535 bytes is above youzan's limit. An
// ext-aware consumer may not subscribe to a topic that is not ext.
func TestYouzanHeaderErrors(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "ext")
	publish(t, n, "plain", "x")
	p := dial(t, n)
	p.send("PUB_EXT plain", extBody(`{"k":"v"}`, "b"))
	p.errorFrame("E_EXT_NOT_SUPPORT PUB_EXT ext content not supported in topic plain")
	p.send("MPUB_EXT plain", mpubBody(extBody("", "b"), extBody(`{"k":"v"}`, "b")))
	p.errorFrame("E_EXT_NOT_SUPPORT MPUB_EXT ext content not supported in topic plain")
	p.send("PUB_EXT ext", extBody(`["k"]`, "b"))
	p.errorFrame("E_INVALID_JSON_HEADER PUB_EXT header is not a JSON object")
	p.send("PUB_EXT ext", extBody(`{"##trace_id":12}`, "b"))
	p.errorFrame("INVALID_TRACE_ID PUB_EXT trace ID should be a string")
	big := `{"k":"` + strings.Repeat("h", 65535-8) + `"}`
	p.send("PUB_EXT ext", extBody(big, "b"))
	p.errorFrame("E_INVALID_JSON_HEADER PUB_EXT header of 65535 bytes is above 65534")
	// Still open after the non-fatal errors; an MPUB_EXT without headers
	// to a plain topic is taken.
	p.send("MPUB_EXT plain", mpubBody(extBody("", "b")))
	p.response(protocol.ResponseOK)
	p.send("PUB_EXT ext", extBody(`{}`, ""))
	p.fatal("E_BAD_BODY PUB_EXT invalid body size 4 for a header of 2 bytes")

	c := dial(t, n)
	c.identify(map[string]any{"extend_support": true})
	c.send("SUB plain ch", nil)
	c.fatal(`E_SUB_EXTEND_FORBIDDON SUB topic "plain" is not ext: do not identify with extend_support`)
}

// /pub_ext takes the header from ?ext= and X-Nsqext- headers; /message/get
// shows it and /lookup's meta says the topic is ext, which is what makes
// youzan's go-nsq read headers.
func TestYouzanHTTPHeaders(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "ext", "ch")
	req, err := http.NewRequest("POST", n.URL("/pub_ext?topic=ext&ext="+url.QueryEscape(`{"a":"1"}`)), strings.NewReader("body"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Nsqext-Color", "red")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/pub_ext: %d", resp.StatusCode)
	}
	if code, body := n.Post(t, "/pub_ext?topic=ext&ext=nojson", "b"); code != 400 || !strings.Contains(body, "E_INVALID_JSON_HEADER") {
		t.Fatalf("/pub_ext with a bad header: %d %s", code, body)
	}
	publish(t, n, "plain", "x")
	if code, body := n.Post(t, "/pub_ext?topic=plain&ext="+url.QueryEscape(`{"a":"1"}`), "b"); code != 400 || !strings.Contains(body, "E_EXT_NOT_SUPPORT") {
		t.Fatalf("/pub_ext to a plain topic: %d %s", code, body)
	}

	c := dial(t, n)
	c.identify(map[string]any{"extend_support": true})
	c.sub("ext", "ch")
	c.rdy(1)
	if m := c.youzanMessage(true, false); string(m.Header) != `{"a":"1","color":"red"}` || string(m.Body) != "body" {
		t.Fatalf("consumer got %q %q", m.Header, m.Body)
	}

	code, body := n.Get(t, "/message/get?topic=ext&partition=0&search_mode=count&search_pos=0")
	var got struct{ Ext, Body string }
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Ext != `{"a":"1","color":"red"}` || got.Body != "body" {
		t.Fatalf("/message/get: %d %s", code, body)
	}
	code, body = n.Get(t, "/lookup?topic=ext&metainfo=true")
	var lookup struct {
		Meta struct {
			ExtendSupport bool `json:"extend_support"`
		} `json:"meta"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &lookup) != nil || !lookup.Meta.ExtendSupport {
		t.Fatalf("/lookup: %d %s", code, body)
	}
}

// go-nsq v1.1.0, which knows nothing of headers, consumes an ext topic's
// messages as plain bodies.
func TestGoNSQConsumesExtTopic(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "ext", "ch")
	p := dial(t, n)
	p.send("MPUB_EXT ext", mpubBody(extBody(`{"k":"v"}`, "a"), extBody(`{"##client_dispatch_tag":"t1"}`, "b"), extBody("", "c")))
	p.response(protocol.ResponseOK)
	var got []string
	testnode.Consume(t, n.TCPAddr(), "ext", "ch", 10*time.Second, func(b string) { got = append(got, b) }, func() bool { return len(got) >= 3 })
	slices.Sort(got)
	if strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("go-nsq got %q", got)
	}
}

// identifyExt IDENTIFYs as youzan's client does on an ext topic, with a
// desired tag and filter, and subscribes with a window of 10.
func identifyExt(t *testing.T, n *testnode.Node, topic, channel, fields string) *client {
	t.Helper()
	c := dial(t, n)
	c.send("IDENTIFY", []byte(`{"extend_support":true`+fields+`}`))
	c.response(protocol.ResponseOK)
	c.sub(topic, channel)
	c.rdy(10)
	return c
}

// receives reads the bodies of len(want) messages, FINs them, and checks
// nothing more comes.
func (c *client) receives(want ...string) {
	c.t.Helper()
	var got []string
	for range want {
		m := c.youzanMessage(true, false)
		got = append(got, string(m.Body))
		c.send("FIN "+idText(m.ID), nil)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		c.t.Fatalf("received %q, want %q", got, want)
	}
	c.nothingFor(100 * time.Millisecond)
}

// desired_tag routes a tagged message only to consumers of its tag, and
// untagged messages, and those of a tag nobody desires, to the others.
func TestYouzanTagDispatch(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "tags", "ch")
	a := identifyExt(t, n, "tags", "ch", `,"desired_tag":"a"`)
	plain := identifyExt(t, n, "tags", "ch", `,"desired_tag":""`)
	// A consumer is in the channel once its SUB is answered.
	p := dial(t, n)
	p.send("MPUB_EXT tags", mpubBody(
		extBody(`{"##client_dispatch_tag":"a"}`, "a1"), extBody("", "u1"),
		extBody(`{"##client_dispatch_tag":"b"}`, "b1"), extBody(`{"##client_dispatch_tag":"a"}`, "a2"),
		extBody(`{"k":"v"}`, "u2")))
	p.response(protocol.ResponseOK)
	a.receives("a1", "a2")
	plain.receives("b1", "u1", "u2")
	waitStats(t, n, "tags", "ch", "every message finished", func(cs chanStats) bool { return cs.Depth == 0 && cs.InFlight == 0 })
}

// ext_filter delivers the messages whose header matches, by each of its
// kinds, and confirms the others: the channel is left with nothing.
func TestYouzanExtFilters(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "filters", "equal", "regex", "glob")
	equal := identifyExt(t, n, "filters", "equal", `,"ext_filter":{"type":1,"filter_ext_key":"k","filter_data":"v1"}`)
	regex := identifyExt(t, n, "filters", "regex", `,"ext_filter":{"type":2,"filter_ext_key":"k","filter_data":"^v[12]$"}`)
	glob := identifyExt(t, n, "filters", "glob", `,"ext_filter":{"type":3,"filter_ext_key":"k","filter_data":"*3"}`)
	p := dial(t, n)
	p.send("MPUB_EXT filters", mpubBody(extBody(`{"k":"v1"}`, "1"), extBody(`{"k":"v2"}`, "2"),
		extBody(`{"k":"v3"}`, "3"), extBody("", "none"), extBody(`{"j":"v1"}`, "other key")))
	p.response(protocol.ResponseOK)
	equal.receives("1")
	regex.receives("1", "2")
	glob.receives("3")
	for _, ch := range []string{"equal", "regex", "glob"} {
		waitStats(t, n, "filters", ch, "every message confirmed", func(cs chanStats) bool { return cs.Depth == 0 && cs.InFlight == 0 })
	}

	bad := dial(t, n)
	bad.send("IDENTIFY", []byte(`{"ext_filter":{"type":2,"filter_ext_key":"k","filter_data":"("}}`))
	bad.fatal("E_BAD_BODY IDENTIFY invalid ext_filter: error parsing regexp: missing closing ): `(`")
}
