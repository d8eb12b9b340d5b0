package replication

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/proto"
)

// A catch-up chunk of megabytes passes through a stream's buffers without
// staying in them.
func TestFrameBuffersDoNotKeepABigFrame(t *testing.T) {
	var wire bytes.Buffer
	w := newFrameWriter(&wire)
	for _, size := range []int{100, 4 << 20, 100} {
		if err := w.write(writeFrame(1, size)); err != nil {
			t.Fatal(err)
		}
		if cap(w.buf) > keptBuffer {
			t.Fatalf("after a frame of %d bytes the writer keeps %d bytes", size, cap(w.buf))
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	r := newFrameReader(&wire)
	for _, size := range []int{100, 4 << 20, 100} {
		f := new(messages.LeaderFrame)
		if err := r.read(f); err != nil {
			t.Fatal(err)
		}
		if got := len(f.GetWrite().GetMessages()); got != size {
			t.Fatalf("read a write of %d bytes, want %d", got, size)
		}
		if cap(r.buf) > keptBuffer {
			t.Fatalf("after a frame of %d bytes the reader keeps %d bytes", size, cap(r.buf))
		}
	}
}

// BenchmarkFrameCodec encodes and decodes a leader's frame of one 230-byte
// write and a follower's ack of it, as a spread write's replication does
// once per message: with the frames' vtprotobuf code (vtproto), and with
// protobuf's reflection (reflect), which the frames used before.
func BenchmarkFrameCodec(b *testing.B) {
	write := writeFrame(7, 230)
	ack := &messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: &messages.ReplicaAck{Topic: "orders", Partition: 1, LogId: 7}}}
	for _, c := range []struct {
		name   string
		encode func([]byte, vtMessage) ([]byte, error)
		decode func([]byte, vtMessage) error
	}{
		{"vtproto", appendFrame, unmarshal},
		{"reflect", appendFrameReflect, func(b []byte, m vtMessage) error { return proto.Unmarshal(b, m) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var buf []byte
			for b.Loop() {
				for _, f := range []vtMessage{write, ack} {
					var err error
					if buf, err = c.encode(buf[:0], f); err != nil {
						b.Fatal(err)
					}
					if err := c.decode(buf[frameHeader:], f.ProtoReflect().New().Interface().(vtMessage)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// appendFrameReflect is appendFrame through protobuf's reflection, as
// frames were encoded before vtprotobuf's code.
func appendFrameReflect(b []byte, m vtMessage) ([]byte, error) {
	start := len(b)
	b, err := proto.MarshalOptions{}.MarshalAppend(binary.BigEndian.AppendUint32(b, 0), m)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start-frameHeader))
	return b, nil
}
