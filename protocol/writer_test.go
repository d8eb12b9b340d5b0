package protocol

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
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
	s.replies.answered(first)

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
