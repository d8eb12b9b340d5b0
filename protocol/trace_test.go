package protocol_test

import (
	"encoding/binary"
	"testing"

	"github.com/partitamq/partita/protocol"
	"github.com/partitamq/partita/storage"
)

func traced(trace uint64, body string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, trace), body...)
}

type tracedOK struct {
	id, trace uint64
	offset    int64
	size      int32
}

func (c *client) tracedOK() tracedOK {
	c.t.Helper()
	ft, data := c.frame()
	if ft != protocol.FrameTypeResponse || len(data) != protocol.TracedOKSize || string(data[:2]) != "OK" {
		c.t.Fatalf("frame = type %d %q, want a traced OK", ft, short(data))
	}
	return tracedOK{
		id:     binary.BigEndian.Uint64(data[2:]),
		trace:  binary.BigEndian.Uint64(data[10:]),
		offset: int64(binary.BigEndian.Uint64(data[18:])),
		size:   int32(binary.BigEndian.Uint32(data[26:])),
	}
}

// PUB_TRACE and MPUB_TRACE answer OK with the message ID, the trace ID, the
// log offset and the size on disk, and the consumer gets the body without
// the trace ID.
func TestPubTraceAnswersWhereTheMessageWent(t *testing.T) {
	n := startNode(t)
	p := dial(t, n)
	p.send("PUB_TRACE traced", traced(0xabcdef, "one"))
	first := p.tracedOK()
	oneSize := int32(storage.EncodedSize(&storage.Message{TraceID: 1, Body: []byte("one")}))
	if first.trace != 0xabcdef || first.offset != 0 || first.size != oneSize {
		t.Fatalf("PUB_TRACE answered %+v, want trace 0xabcdef at 0 of %d bytes", first, oneSize)
	}
	p.send("MPUB_TRACE traced", mpubBody(traced(7, "two"), traced(8, "three")))
	batch := p.tracedOK()
	twoSize := int32(storage.EncodedSize(&storage.Message{TraceID: 1, Body: []byte("two")}))
	threeSize := int32(storage.EncodedSize(&storage.Message{TraceID: 1, Body: []byte("three")}))
	if batch.id != first.id+1 || batch.trace != 7 || batch.offset != int64(oneSize) || batch.size != twoSize+threeSize {
		t.Fatalf("MPUB_TRACE answered %+v after %+v", batch, first)
	}

	c := consumer(t, n, "traced", "ch", 10)
	for i, want := range []string{"one", "two", "three"} {
		m := c.message()
		if string(m.Body) != want || m.ID != first.id+uint64(i) {
			t.Fatalf("message %d = %s %q, want %s %q", i, idText(m.ID), m.Body, idText(first.id+uint64(i)), want)
		}
	}

	p.send("PUB_TRACE traced", []byte("short"))
	p.fatal(`E_BAD_MESSAGE PUB_TRACE message of 5 bytes has no body after its trace ID`)
}
