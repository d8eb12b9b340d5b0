package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// youzan's /message/finish on an ordered channel: the message in flight
// is finished by its ID over HTTP, the next is delivered, and after a
// kill -9 of the leader the new leader delivers from the next one, not
// the finished one again: the finish is confirmed on every ISR member as
// an ordered FIN is.
func TestMessageFinishHoldsThroughAFailover(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("poisoned", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=poisoned&channel=seq", "")
	p := producer(t, leader.TCP)
	for _, body := range []string{"bad", "good"} {
		if err := p.Publish("poisoned", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	r := subOrdered(t, leader.TCP, "poisoned", "seq", 1)
	bad := r.message()
	if string(bad.Body) != "bad" {
		t.Fatalf("first message %q", bad.Body)
	}
	var id [16]byte
	protocol.FormatMessageID(id[:], bad.ID)
	q := fmt.Sprintf("/message/finish?topic=poisoned&channel=seq&partition=0&msgid=%s", id[:])
	if code, body := testnode.Post(t, leader.HTTP, q, ""); code != 200 {
		t.Fatalf("finish: %d %s", code, body)
	}
	if m := r.message(); string(m.Body) != "good" {
		t.Fatalf("after the finish: %q, want the next message", m.Body)
	}

	leader.Kill(t)
	var next string
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next = c.state("poisoned", 0).Leader
		return next != st.Leader && next != ""
	})
	var r2 *rawConn
	testnode.Eventually(t, 20*time.Second, "SUB_ORDERED on the new leader", func() bool {
		// A connection of its own each time: a refused SUB ends it.
		r2 = dialRaw(t, c.nodes[next].TCP)
		r2.send("SUB_ORDERED poisoned seq 0")
		_, data := r2.frame(5 * time.Second)
		return string(data) == "OK"
	})
	r2.send("RDY 1")
	if m := r2.message(); string(m.Body) != "good" {
		t.Fatalf("the new leader delivered %q first, want the message after the finished one", m.Body)
	}
}
