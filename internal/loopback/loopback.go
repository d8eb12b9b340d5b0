// Package loopback finds addresses on 127.0.0.1 for tests that listen.
package loopback

import (
	"net"
	"testing"
)

// FreeAddr returns a 127.0.0.1 address nobody listened on a moment ago.
// Another process may take it before the caller binds: tests that cannot
// bear that retry on EADDRINUSE.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Pair returns the two ends of a TCP connection over 127.0.0.1, closed
// when the test ends.
func Pair(t testing.TB) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}
