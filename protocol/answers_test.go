package protocol_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/partitamq/partita/protocol"
)

// A publish's answer is written by the session's reader when the partition
// took it on the reader's goroutine, while the writer goroutine sends the
// same connection's deliveries: frames never mix, every PUB gets its OK in
// order, every message arrives whole. Run under -race, it also checks that
// the two take turns on the output buffer.
func TestPublishAnswersAndDeliveriesShareAConnection(t *testing.T) {
	n := startNode(t)
	const pubs, msgs = 500, 100
	c := consumer(t, n, "delivered", "ch", msgs)

	// Deliveries to c while c publishes.
	p := dial(t, n)
	p.identify(map[string]any{})
	go func() {
		for i := range msgs {
			p.conn.Write(command("PUB delivered", []byte(fmt.Sprintf("m%03d", i))))
		}
	}()
	var out bytes.Buffer
	for i := range pubs {
		out.Write(command("PUB answered", []byte(fmt.Sprintf("p%03d", i))))
	}
	written := make(chan error, 1)
	go func() { _, err := c.conn.Write(out.Bytes()); written <- err }()

	oks, got := 0, map[string]bool{}
	for oks < pubs || len(got) < msgs {
		ft, data := c.frame()
		switch ft {
		case protocol.FrameTypeResponse:
			if string(data) != protocol.ResponseOK {
				t.Fatalf("answer %d is %q, want OK", oks, short(data))
			}
			oks++
		case protocol.FrameTypeMessage:
			m, err := protocol.DecodeMessage(data)
			if err != nil {
				t.Fatalf("a delivery frame does not decode: %v", err)
			}
			body := string(m.Body)
			if len(body) != 4 || body[0] != 'm' || got[body] {
				t.Fatalf("delivery %q: not one of the published messages, or twice", body)
			}
			got[body] = true
		default:
			t.Fatalf("frame type %d %q after %d OKs and %d messages", ft, short(data), oks, len(got))
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	// Every PUB was written: the topic holds them all.
	var held int64
	for _, tp := range stats(t, n, "answered").Topics {
		held += tp.Messages
	}
	if held != pubs {
		t.Fatalf("topic answered holds %d messages, want %d", held, pubs)
	}
}
