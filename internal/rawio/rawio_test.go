package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
)

// A peer that reads nothing fills the socket: TryWrite then writes part of what
// it is given, or nothing, and returns at once; what it reports written is
// what the peer reads, in order.
func TestTryWriteNeverWaitsAndReportsWhatWent(t *testing.T) {
	tc, peer := loopback.Pair(t)
	var sent bytes.Buffer
	chunk := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	short := false
	deadline := time.Now().Add(10 * time.Second)
	for !short {
		if time.Now().After(deadline) {
			t.Fatal("the socket never filled")
		}
		start := time.Now()
		n := TryWrite(tc, chunk)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("TryWrite took %v", d)
		}
		sent.Write(chunk[:n])
		short = n < len(chunk)
	}
	got := make([]byte, sent.Len())
	peer.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatal("the peer read other bytes than TryWrite reported written")
	}
	if TryWrite(tc, nil) != 0 {
		t.Fatal("an empty write reported bytes written")
	}
}

// A stream larger than the socket buffers goes through whole and in order:
// the writer waits for room and the reader for bytes through the poller.
func TestReaderAndWriterCarryAStreamLargerThanTheSocket(t *testing.T) {
	a, b := loopback.Pair(t)
	if _, raw := Reader(b).(*reader); !raw && supported {
		t.Fatal("a TCP connection was not read with raw calls")
	}
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	errc := make(chan error, 1)
	go func() {
		w := Writer(a)
		for off := 0; off < len(data); off += 100_000 {
			if _, err := w.Write(data[off:min(off+100_000, len(data))]); err != nil {
				errc <- err
				return
			}
		}
		errc <- a.CloseWrite()
	}()
	b.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(Reader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
	}
}

// A read past the connection's deadline fails as net.Conn's does, and a
// read of a closed connection with net.ErrClosed.
func TestReaderKeepsTheConnectionsDeadlineAndErrors(t *testing.T) {
	a, b := loopback.Pair(t)
	r := Reader(b)
	b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := r.Read(make([]byte, 10))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v", err)
	}
	b.SetReadDeadline(time.Time{})
	if _, err := Writer(a).Write([]byte("after")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := io.ReadAtLeast(r, buf, 5); err != nil || string(buf[:n]) != "after" {
		t.Fatalf("read %q, %v after the deadline was lifted", buf[:n], err)
	}
	b.Close()
	if _, err := r.Read(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read of a closed connection: %v", err)
	}
	if _, err := Writer(b).Write(buf); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write to a closed connection: %v", err)
	}
}

// A connection that is not a socket of its own (TLS, a pipe) is read and
// written as it is.
func TestOtherConnectionsAreLeftAsTheyAre(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if Reader(p) != io.Reader(p) || Writer(p) != io.Writer(p) {
		t.Fatal("a pipe was wrapped")
	}
}

// After StopWaiting a reader returns what the socket holds, then io.EOF
// at once instead of waiting for bytes the peer may never send.
func TestStopWaitingReadsWhatArrivedThenEnds(t *testing.T) {
	if !supported {
		return
	}
	a, b := loopback.Pair(t)
	r := Reader(b).(*reader)
	// One write, one segment: once the first command is read the second is
	// in the socket too.
	if _, err := a.Write([]byte("FIN 1\nFIN 2\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if _, err := io.ReadFull(r, got); err != nil || string(got) != "FIN 1\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	// A deadline already past, as a closing server sets to wake a waiting
	// read, does not keep what arrived from being read.
	r.StopWaiting()
	b.SetReadDeadline(time.Now())
	all, err := io.ReadAll(r)
	if err != nil || string(all) != "FIN 2\n" {
		t.Fatalf("after StopWaiting read %q, %v; want the second command and io.EOF", all, err)
	}
}

// A read waiting for bytes when StopWaiting comes, woken by a deadline,
// ends with io.EOF rather than a timeout.
func TestStopWaitingEndsAWaitingRead(t *testing.T) {
	if !supported {
		return
	}
	_, b := loopback.Pair(t)
	r := Reader(b).(*reader)
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 16))
		done <- err
	}()
	r.StopWaiting()
	b.SetReadDeadline(time.Now())
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("a waiting read ended with %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting read went on waiting after StopWaiting and a deadline")
	}
}
