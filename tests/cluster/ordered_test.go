package cluster

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// rawConn is an NSQ V2 connection driven by hand, for commands go-nsq does
// not have (SUB_ORDERED).
type rawConn struct {
	t    *testing.T
	conn net.Conn
	// The sections of youzan's frame its messages carry: detail after
	// SUB_ORDERED or SUB_ADVANCED, ext once IDENTIFYed ext-aware on an ext
	// topic.
	detail, ext bool
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write([]byte(protocol.MagicV2)); err != nil {
		t.Fatal(err)
	}
	return &rawConn{t: t, conn: c}
}

func (r *rawConn) send(line string) {
	r.t.Helper()
	if strings.HasPrefix(line, "SUB_ORDERED ") || strings.HasPrefix(line, "SUB_ADVANCED ") {
		r.detail = true
	}
	if _, err := r.conn.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
}

// frame reads the next frame that is not a heartbeat.
func (r *rawConn) frame(within time.Duration) (int32, []byte) {
	r.t.Helper()
	r.conn.SetReadDeadline(time.Now().Add(within))
	for {
		typ, data, err := protocol.ReadFrame(r.conn)
		if err != nil {
			r.t.Fatalf("reading a frame: %v", err)
		}
		if typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			r.send("NOP")
			continue
		}
		return typ, data
	}
}

func (r *rawConn) message() protocol.Message {
	r.t.Helper()
	m := r.youzanMessage()
	return protocol.Message{Timestamp: m.Timestamp, Attempts: m.Attempts, ID: m.ID, Body: m.Body}
}

// youzanMessage reads a message as youzan's client decodes it on this
// connection.
func (r *rawConn) youzanMessage() protocol.MessageFrame {
	r.t.Helper()
	typ, data := r.frame(10 * time.Second)
	if typ != protocol.FrameTypeMessage {
		r.t.Fatalf("frame %d %q, want a message", typ, data)
	}
	m, err := protocol.DecodeExtendedMessage(data, r.ext, r.detail)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

// subOrdered subscribes in order to partition 0 of topic's channel on a
// connection of its own, with rdy messages allowed.
func subOrdered(t *testing.T, addr, topic, channel string, rdy int) *rawConn {
	t.Helper()
	r := dialRaw(t, addr)
	r.send(fmt.Sprintf("SUB_ORDERED %s %s 0", topic, channel))
	if typ, data := r.frame(5 * time.Second); string(data) != "OK" {
		t.Fatalf("SUB_ORDERED: %d %q", typ, data)
	}
	r.send(fmt.Sprintf("RDY %d", rdy))
	return r
}

func (r *rawConn) fin(m protocol.Message) {
	var id [16]byte
	protocol.FormatMessageID(id[:], m.ID)
	r.send("FIN " + string(id[:]))
}

// A plain SUB on an ordered topic is refused with E_SUB_ORDER_IS_MUST.
func TestOrderedTopicRefusesPlainSub(t *testing.T) {
	c := startCluster(t, 1)
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=ord&ordered=true", ""); code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	r := dialRaw(t, c.nodes["n1"].TCP)
	r.send("SUB ord ch")
	typ, data := r.frame(5 * time.Second)
	if typ != protocol.FrameTypeError || !strings.HasPrefix(string(data), "E_SUB_ORDER_IS_MUST") {
		t.Fatalf("frame %d %q", typ, data)
	}
	r2 := dialRaw(t, c.nodes["n1"].TCP)
	r2.send("SUB_ORDERED ord ch 0")
	if typ, data := r2.frame(5 * time.Second); typ != protocol.FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("SUB_ORDERED: %d %q", typ, data)
	}
}

// An ordered channel delivers one message at a time; its FIN fails while a
// replica is unreachable and the ISR still names it, and succeeds again
// once a write has shrunk the ISR.
func TestOrderedFinNeedsEveryISRMember(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("ordfin", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=ordfin&channel=seq", "")
	p := producer(t, leader.TCP)
	for i := 0; i < 5; i++ {
		if err := p.Publish("ordfin", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	r := subOrdered(t, leader.TCP, "ordfin", "seq", 10)
	m := r.message()
	if string(m.Body) != "0" {
		t.Fatalf("first message %q", m.Body)
	}
	r.fin(m)
	m = r.message()
	if string(m.Body) != "1" {
		t.Fatalf("second message %q: ordered delivery is one at a time, in order", m.Body)
	}

	// A member of the ISR as it is now: on a loaded machine a slow
	// follower may have been shrunk out already.
	victim := c.followers(c.state("ordfin", 0))[0]
	c.nodes[victim].Cmd.Process.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { c.nodes[victim].Cmd.Process.Signal(syscall.SIGCONT) })
	r.fin(m)
	typ, data := r.frame(10 * time.Second)
	if typ != protocol.FrameTypeError || !strings.HasPrefix(string(data), "E_FIN_FAILED") {
		t.Fatalf("FIN with a replica stopped: frame %d %q, want E_FIN_FAILED", typ, data)
	}

	// A write notices the stopped replica and shrinks the ISR.
	if err := p.Publish("ordfin", []byte("5")); err != nil {
		t.Fatal(err)
	}
	if isr := c.state("ordfin", 0).ISR; slices.Contains(isr, victim) {
		t.Fatalf("ISR %v after the write still holds the stopped %s", isr, victim)
	}
	m = r.message()
	r.fin(m)
	next := r.message()
	if next.ID <= m.ID {
		t.Fatalf("message %d after %d", next.ID, m.ID)
	}
}
