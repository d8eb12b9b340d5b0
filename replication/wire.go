package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"

	"google.golang.org/protobuf/proto"
)

// preface opens every connection, from the leader's side, so a follower
// drops a client that speaks something else before reading any frame.
const preface = "PARTITA-REPLICATION/1\n"

// A frame on the wire is a 4-byte big-endian length and that many bytes of
// protobuf: a LeaderFrame from the leader, a FollowerFrame back.
const frameHeader = 4

// keptBuffer is the largest encode or decode buffer a stream keeps between
// frames; a catch-up chunk of megabytes gets a buffer of its own, so a node
// with many idle streams does not hold a chunk's worth of memory for each.
const keptBuffer = 64 << 10

// socketBuffer is each session's buffer for reading and for writing: the
// frames of many partitions per system call.
const socketBuffer = 64 << 10

var errBadPreface = errors.New("replication: peer did not open with the replication preface")

type frameWriter struct {
	bw  *bufio.Writer
	buf []byte
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{bw: bufio.NewWriterSize(w, socketBuffer)}
}

// write buffers one frame; flush sends everything buffered in as few
// syscalls as the socket takes.
func (w *frameWriter) write(m vtMessage) error {
	b, err := appendFrame(w.buf[:0], m)
	if err != nil {
		return err
	}
	if cap(b) <= keptBuffer {
		w.buf = b[:0]
	}
	_, err = w.bw.Write(b)
	return err
}

func (w *frameWriter) flush() error { return w.bw.Flush() }

// vtMessage is a message with vtprotobuf's generated encoding
// (messages/partita_vtproto.pb.go), as every frame is. It encodes and
// decodes without the reflection proto.Marshal and proto.Unmarshal go
// through, which took a twentieth of a node's CPU with writes spread over
// a thousand partitions, a frame or more per message; it allocates the
// same. The bytes are the same protobuf.
type vtMessage interface {
	proto.Message
	Reset()
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVT([]byte) error
}

// appendFrame appends m as a frame: its length, then its bytes.
func appendFrame(b []byte, m vtMessage) ([]byte, error) {
	start, n := len(b), m.SizeVT()
	if n > maxFrameSize {
		return b, fmt.Errorf("replication: frame of %d bytes exceeds %d", n, maxFrameSize)
	}
	b = slices.Grow(b, frameHeader+n)[:start+frameHeader+n]
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	if wrote, err := m.MarshalToSizedBufferVT(b[start+frameHeader:]); err != nil || wrote != n {
		return b[:start], fmt.Errorf("replication: encode frame: %d of %d bytes: %v", wrote, n, err)
	}
	return b, nil
}

type frameReader struct {
	br  *bufio.Reader
	buf []byte
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, socketBuffer)}
}

// read decodes the next frame into m. A length over maxFrameSize or bytes
// that are not the frame's protobuf end the connection: nothing after them
// can be trusted to start on a frame boundary.
func (r *frameReader) read(m vtMessage) error {
	var hdr [frameHeader]byte
	if _, err := io.ReadFull(r.br, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxFrameSize {
		return fmt.Errorf("replication: frame of %d bytes exceeds %d", n, maxFrameSize)
	}
	b := r.buf
	switch {
	case int(n) > keptBuffer:
		b = make([]byte, n)
	case cap(b) < int(n):
		r.buf = make([]byte, n)
		b = r.buf
	}
	b = b[:n]
	if _, err := io.ReadFull(r.br, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if err := unmarshal(b, m); err != nil {
		return fmt.Errorf("replication: decode frame: %w", err)
	}
	return nil
}

// unmarshal decodes b into m, which it resets first as proto.Unmarshal
// does. vtprotobuf's decoding copies bytes and strings out of b, as
// proto.Unmarshal's does, so the reader's buffer may be reused. A frame
// it refuses is decoded again by proto.Unmarshal, whose word is final: it
// keeps a known field sent with another wire type as an unknown field,
// where vtprotobuf's refuses the frame. vtprotobuf's takes more than
// protobuf's in turn: strings that are not UTF-8, which would name no
// topic or channel a node holds, and unknown groups whose end does not
// match their start; no node's encoding writes either
// (messages.FuzzVTDecodesAsProtobuf), and no node reads a frame's unknown
// fields.
func unmarshal(b []byte, m vtMessage) error {
	m.Reset()
	if m.UnmarshalVT(b) == nil {
		return nil
	}
	return proto.Unmarshal(b, m)
}

func readPreface(c net.Conn) error {
	got := make([]byte, len(preface))
	if n, err := io.ReadFull(c, got); err != nil {
		if n == 0 && errors.Is(err, io.EOF) {
			return fmt.Errorf("replication: peer sent nothing: %w", err)
		}
		return fmt.Errorf("replication: read preface: %w", err)
	}
	if string(got) != preface {
		return errBadPreface
	}
	return nil
}
