package protocol

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
)

// writeCounter counts the writes a session makes to its connection.
type writeCounter struct {
	net.Conn
	writes atomic.Int64
}

func (c *writeCounter) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// Replies that become ready together, as the PUBs of one group-committed
// record do, go to the socket in one write, still in command order.
func TestRepliesReadyTogetherShareOneWrite(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	conn := &writeCounter{Conn: server}
	s := newSession(&Server{}, conn, 1)
	go s.writeLoop()
	defer close(s.quit)

	const n = 10
	first := &reply{pending: true}
	s.send(first)
	for i := 1; i < n; i++ {
		s.send(&reply{frameType: FrameTypeResponse, data: []byte{'0' + byte(i)}})
	}
	first.frameType, first.data = FrameTypeResponse, []byte{'0'}
	s.answered(first)

	got := make([]byte, n*9) // size, frame type, one byte each
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if b := got[i*9+8]; b != '0'+byte(i) {
			t.Fatalf("reply %d is %q, want %q", i, b, '0'+byte(i))
		}
	}
	if w := conn.writes.Load(); w != 1 {
		t.Fatalf("%d replies ready together took %d writes, want 1", n, w)
	}
}

// Answers set on the goroutines partitions answer on go out from there,
// without the writer, and a socket too full to take one whole leaves the
// rest to the writer: the client gets every byte, in command order.
func TestAnswersSetElsewhereGoOutWholeAndInOrder(t *testing.T) {
	client, server := loopback.Pair(t)
	server.SetWriteBuffer(4096)
	s := newSession(&Server{}, server, 1)
	go s.writeLoop()
	defer close(s.quit)

	// Large answers, so the socket fills while the client is not reading.
	const n = 64
	body := func(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i%26)}, 32<<10) }
	rs := make([]*reply, n)
	for i := range rs {
		rs[i] = &reply{pending: true}
		s.send(rs[i])
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, r := range rs {
			r.frameType, r.data = FrameTypeResponse, body(i)
			s.answered(r)
		}
	}()
	<-done // every answer set before the client reads a byte
	br := bufio.NewReader(client)
	for i := range n {
		client.SetReadDeadline(time.Now().Add(10 * time.Second))
		ft, data, err := ReadFrame(br)
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if ft != FrameTypeResponse || !bytes.Equal(data, body(i)) {
			t.Fatalf("answer %d is not the %d-th set (type %d, %d bytes starting %q)", i, i, ft, len(data), data[:1])
		}
	}
}
