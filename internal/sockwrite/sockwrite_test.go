package sockwrite

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
)

// A peer that reads nothing fills the socket: Try then writes part of what
// it is given, or nothing, and returns at once; what it reports written is
// what the peer reads, in order.
func TestTryNeverWaitsAndReportsWhatWent(t *testing.T) {
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
		n := Try(tc, chunk)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Try took %v", d)
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
		t.Fatal("the peer read other bytes than Try reported written")
	}
	if Try(tc, nil) != 0 {
		t.Fatal("an empty write reported bytes written")
	}
}
