package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// sendBody sends a command with its size-prefixed body.
func (r *rawConn) sendBody(line string, body []byte) {
	r.t.Helper()
	b := binary.BigEndian.AppendUint32([]byte(line+"\n"), uint32(len(body)))
	if _, err := r.conn.Write(append(b, body...)); err != nil {
		r.t.Fatal(err)
	}
}

// answer reads the next frame that is not a message and returns it as text.
func (r *rawConn) answer() string {
	r.t.Helper()
	typ, data := r.frame(10 * time.Second)
	if typ == protocol.FrameTypeMessage {
		r.t.Fatalf("a message, want an answer")
	}
	return string(data)
}

// identifyExt IDENTIFYs as youzan's go-nsq does on an ext topic, with
// further fields.
func (r *rawConn) identifyExt(fields string) {
	r.t.Helper()
	r.sendBody("IDENTIFY", []byte(`{"extend_support":true`+fields+`}`))
	if a := r.answer(); a != "OK" {
		r.t.Fatalf("IDENTIFY: %s", a)
	}
	r.ext = true
}

// extBody is youzan's PUB_EXT body: header length, header, message.
func extBody(header, body string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(header)))
	return append(append(b, header...), body...)
}

// extMPUB is youzan's MPUB_EXT body for header/body pairs.
func extMPUB(pairs ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(pairs)/2))
	for i := 0; i < len(pairs); i += 2 {
		m := extBody(pairs[i], pairs[i+1])
		b = binary.BigEndian.AppendUint32(b, uint32(len(m)))
		b = append(b, m...)
	}
	return b
}

// createExtTopic makes a one-partition ext topic on every node with a
// channel, and returns its leader.
func (c *testCluster) createExtTopic(name string, channels ...string) string {
	c.t.Helper()
	code, body := testnode.Post(c.t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=%s&partition_num=1&replicator=3&extend=true", name), "")
	if code != 200 {
		c.t.Fatalf("creating %s: %d %s", name, code, body)
	}
	leader := c.state(name, 0).Leader
	for _, ch := range channels {
		if code, body := testnode.Post(c.t, c.nodes[leader].HTTP, "/channel/create?topic="+name+"&channel="+ch, ""); code != 200 {
			c.t.Fatalf("creating channel %s: %d %s", ch, code, body)
		}
	}
	return leader
}

// newLeader waits for a leader other than old that takes writes, probing
// with a PUB_EXT of probe, and returns it.
func (c *testCluster) newLeader(topic, old string, probe []byte) string {
	c.t.Helper()
	var leader string
	testnode.Eventually(c.t, 30*time.Second, "a new leader taking writes", func() bool {
		st, ok, err := c.assign.Get(context.Background(), topic, 0)
		if err != nil || !ok || st.Leader == old || st.Leader == "" {
			return false
		}
		r := dialRaw(c.t, c.nodes[st.Leader].TCP)
		defer r.conn.Close()
		r.sendBody("PUB_EXT "+topic+" 0", probe)
		if r.answer() != "OK" {
			return false
		}
		leader = st.Leader
		return true
	})
	return leader
}

// PUB_EXT and MPUB_EXT headers are part of the replicated record: after
// kill -9 of the leader, an ext-aware consumer of the new leader reads every
// message with its header, and a plain one the bodies alone.
func TestYouzanHeadersSurviveFailover(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.createExtTopic("yzext", "aware", "plain")
	p := dialRaw(t, c.nodes[leader].TCP)
	p.sendBody("PUB_EXT yzext 0", extBody(`{"k":"one"}`, "1"))
	if a := p.answer(); a != "OK" {
		t.Fatalf("PUB_EXT: %s", a)
	}
	p.sendBody("MPUB_EXT yzext 0", extMPUB(`{"k":"two"}`, "2", "", "3"))
	if a := p.answer(); a != "OK" {
		t.Fatalf("MPUB_EXT: %s", a)
	}
	c.nodes[leader].Kill(t)
	newLeader := c.newLeader("yzext", leader, extBody(`{"k":"four"}`, "4"))

	want := []struct{ header, body string }{{`{"k":"one"}`, "1"}, {`{"k":"two"}`, "2"}, {"", "3"}, {`{"k":"four"}`, "4"}}
	aware := dialRaw(t, c.nodes[newLeader].TCP)
	aware.identifyExt("")
	aware.send("SUB yzext aware")
	if a := aware.answer(); a != "OK" {
		t.Fatalf("SUB: %s", a)
	}
	aware.send("RDY 10")
	for i, w := range want {
		m := aware.youzanMessage()
		if string(m.Header) != w.header || string(m.Body) != w.body {
			t.Fatalf("message %d after the failover = %q %q, want %q %q", i, m.Header, m.Body, w.header, w.body)
		}
	}
	plain := dialRaw(t, c.nodes[newLeader].TCP)
	plain.send("SUB yzext plain")
	if a := plain.answer(); a != "OK" {
		t.Fatalf("SUB: %s", a)
	}
	plain.send("RDY 10")
	for i, w := range want {
		if m := plain.message(); string(m.Body) != w.body {
			t.Fatalf("plain message %d = %q, want %q", i, m.Body, w.body)
		}
	}
}

// A desired tag and a filter select the same messages from the new leader
// after kill -9 of the old one, on an ordered channel too: the tags and
// headers are in the replicated records, and the filter confirms what it
// rejects there.
func TestYouzanTagsAndFiltersSurviveFailover(t *testing.T) {
	c := startCluster(t, 3)
	leader := c.createExtTopic("yztag", "tagged", "filtered")
	p := dialRaw(t, c.nodes[leader].TCP)
	p.sendBody("MPUB_EXT yztag 0", extMPUB(
		`{"##client_dispatch_tag":"a","k":"x"}`, "a1", `{"k":"y"}`, "u1", `{"##client_dispatch_tag":"a","k":"y"}`, "a2"))
	if a := p.answer(); a != "OK" {
		t.Fatalf("MPUB_EXT: %s", a)
	}
	c.nodes[leader].Kill(t)
	newLeader := c.newLeader("yztag", leader, extBody(`{"k":"y"}`, "u2"))

	tagged := dialRaw(t, c.nodes[newLeader].TCP)
	tagged.identifyExt(`,"desired_tag":"a"`)
	tagged.send("SUB yztag tagged")
	if a := tagged.answer(); a != "OK" {
		t.Fatalf("SUB: %s", a)
	}
	tagged.send("RDY 10")
	for _, want := range []string{"a1", "a2"} {
		if m := tagged.youzanMessage(); string(m.Body) != want {
			t.Fatalf("tagged consumer got %q, want %q", m.Body, want)
		}
	}

	filtered := dialRaw(t, c.nodes[newLeader].TCP)
	filtered.identifyExt(`,"ext_filter":{"type":1,"filter_ext_key":"k","filter_data":"y"}`)
	filtered.send("SUB_ORDERED yztag filtered 0")
	if a := filtered.answer(); a != "OK" {
		t.Fatalf("SUB_ORDERED: %s", a)
	}
	filtered.send("RDY 1")
	for _, want := range []string{"u1", "a2", "u2"} {
		m := filtered.youzanMessage()
		if string(m.Body) != want {
			t.Fatalf("filtered ordered consumer got %q, want %q", m.Body, want)
		}
		filtered.fin(protocol.Message{ID: m.ID})
	}
	// The filter's confirmations and the FINs leave nothing behind: the
	// first message, filtered out, and the last, FINished, are confirmed.
	for _, pos := range []int{0, 3} {
		testnode.Eventually(t, 10*time.Second, fmt.Sprintf("message %d confirmed in the filtered channel", pos), func() bool {
			var got struct {
				Channels []struct{ Channel, State string }
			}
			getJSONInto(t, c.nodes[newLeader].HTTP, fmt.Sprintf("/message/get?topic=yztag&partition=0&search_mode=count&search_pos=%d", pos), &got)
			for _, ch := range got.Channels {
				if ch.Channel == "filtered" {
					return ch.State == "confirmed"
				}
			}
			return false
		})
	}
}
