package protocol_test

import (
	"bytes"
	"compress/flate"
	"math/rand/v2"
	"testing"

	"github.com/golang/snappy"
	"github.com/partitamq/partita/protocol"
)

// upgradeSnappy and upgradeDeflate switch the client side of the stream the
// way go-nsq does; the reader wraps the buffered one, which may already hold
// compressed bytes that came right after the IDENTIFY answer.
func (c *client) upgradeSnappy() {
	w := snappy.NewBufferedWriter(c.conn)
	c.r, c.w, c.flush = snappy.NewReader(c.r), w, w.Flush
}

func (c *client) upgradeDeflate(level int) {
	w, err := flate.NewWriter(c.conn, level)
	if err != nil {
		c.t.Fatal(err)
	}
	c.r, c.w, c.flush = flate.NewReader(c.r.(flate.Reader)), w, w.Flush
}

func TestSnappy(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	r := c.negotiate(map[string]any{"snappy": true})
	if !r.Snappy || r.Deflate {
		t.Fatalf("IDENTIFY granted snappy %v deflate %v, want snappy only", r.Snappy, r.Deflate)
	}
	c.upgradeSnappy()
	c.response(protocol.ResponseOK)
	roundTripBig(t, c, "snappy")
}

func TestDeflate(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	r := c.negotiate(map[string]any{"deflate": true, "deflate_level": 3})
	if !r.Deflate || r.Snappy || r.DeflateLevel != 3 {
		t.Fatalf("IDENTIFY granted deflate %v level %d snappy %v, want deflate level 3", r.Deflate, r.DeflateLevel, r.Snappy)
	}
	c.upgradeDeflate(r.DeflateLevel)
	c.response(protocol.ResponseOK)
	roundTripBig(t, c, "deflate")
}

func TestSnappyAndDeflateRefused(t *testing.T) {
	n := startNode(t)
	c := dial(t, n)
	c.send("IDENTIFY", []byte(`{"feature_negotiation":true,"snappy":true,"deflate":true}`))
	c.fatal("E_IDENTIFY_FAILED cannot enable both deflate and snappy compression")
}

// roundTripBig publishes a 128000-byte message over the compressed
// connection and consumes it back over the same connection. Random bytes do
// not compress, so the frames span several compressed chunks.
func roundTripBig(t *testing.T, c *client, topic string) {
	t.Helper()
	body := make([]byte, 128000)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(body)
	c.pub(topic, body)
	c.sub(topic, "ch")
	c.rdy(1)
	m := c.message()
	if !bytes.Equal(m.Body, body) || m.Attempts != 1 {
		t.Fatalf("got %d bytes attempts %d, want the %d bytes published", len(m.Body), m.Attempts, len(body))
	}
	c.send("FIN "+idText(m.ID), nil)
	c.send("CLS", nil)
	c.response(protocol.ResponseCloseWait)
}
