package node

import (
	"context"
	"net"
	"testing"
	"time"
)

// A port nobody listens on refuses; a process that listens but is frozen
// (SIGSTOP: the kernel still completes the handshake) does not.
func TestRefusedTellsAGoneProcessFromAFrozenOne(t *testing.T) {
	frozen, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Close() // never accepts
	if refused(context.Background(), frozen.Addr().String(), time.Second) {
		t.Error("a listening port counted as refusing")
	}
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := gone.Addr().String()
	gone.Close()
	if !refused(context.Background(), addr, time.Second) {
		t.Error("a closed port not counted as refusing")
	}
}
