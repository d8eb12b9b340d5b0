package protocol_test

import (
	"encoding/binary"
	"testing"

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
