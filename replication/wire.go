package replication

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

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
func (w *frameWriter) write(m proto.Message) error {
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

// appendFrame appends m as a frame: its length, then its bytes.
func appendFrame(b []byte, m proto.Message) ([]byte, error) {
	start := len(b)
	b, err := proto.MarshalOptions{}.MarshalAppend(append(b, 0, 0, 0, 0), m)
	if err != nil {
		return b[:start], fmt.Errorf("replication: encode frame: %w", err)
	}
	n := len(b) - start - frameHeader
	if n > maxFrameSize {
		return b[:start], fmt.Errorf("replication: frame of %d bytes exceeds %d", n, maxFrameSize)
	}
	binary.BigEndian.PutUint32(b[start:], uint32(n))
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
func (r *frameReader) read(m proto.Message) error {
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
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("replication: decode frame: %w", err)
	}
	return nil
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
