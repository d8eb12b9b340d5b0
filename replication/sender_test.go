package replication

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/proto"
)

// Frames pushed from many goroutines while the peer reads nothing, so that
// the socket fills and writes at once are cut short and left to the
// sender, reach the peer whole and, per pusher, in order once it reads.
func TestPushedFramesArriveWholeAndInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetWriteBuffer(16384)
	peer := <-accepted
	defer peer.Close()

	const pushers, each = 4, 400
	out := newOutbox[*messages.FollowerFrame]()
	done := make(chan struct{})
	sent := make(chan error, 1)
	heartbeat := func() proto.Message {
		return &messages.FollowerFrame{Body: &messages.FollowerFrame_Heartbeat{Heartbeat: heartbeat("n2")}}
	}
	go func() {
		sent <- sendFrames(nc, time.Hour, heartbeat, out, func(f *messages.FollowerFrame) proto.Message { return f }, done)
	}()
	r := newFrameReader(peer)
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if err := r.read(new(messages.FollowerFrame)); err != nil { // the sender's first heartbeat: it is up
		t.Fatal(err)
	}
	out.wire.Lock() // and idle, waiting for frames, once it lets go of the socket
	out.wire.Unlock()
	body := make([]byte, 700) // several frames fill the socket's buffer
	push := func(p int) {
		for i := range each {
			out.push(&messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: &messages.ReplicaAck{
				Topic: fmt.Sprint(p), LogId: int64(i), Text: string(body),
			}}})
		}
	}
	// One pusher alone writes at once until the socket is full, and the
	// write that finds it full is cut short; then the others join in.
	push(0)
	if out.cutShort.Load() == 0 {
		t.Fatal("no write at once was cut short: the test did not fill the socket")
	}
	var wg sync.WaitGroup
	for p := 1; p < pushers; p++ {
		wg.Go(func() { push(p) })
	}
	wg.Wait() // pushing never waits on the socket
	next := make([]int64, pushers)
	for got := 0; got < pushers*each; {
		f := new(messages.FollowerFrame)
		peer.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := r.read(f); err != nil {
			t.Fatalf("after %d frames: %v", got, err)
		}
		a := f.GetAck()
		if a == nil {
			continue // the heartbeat
		}
		var p int
		fmt.Sscan(a.GetTopic(), &p)
		if a.GetLogId() != next[p] || len(a.GetText()) != len(body) {
			t.Fatalf("pusher %d: frame %d (%d bytes of body) arrived where %d was due", p, a.GetLogId(), len(a.GetText()), next[p])
		}
		next[p]++
		got++
	}
	close(done)
	if err := <-sent; err != nil {
		t.Fatalf("sender: %v", err)
	}
}
