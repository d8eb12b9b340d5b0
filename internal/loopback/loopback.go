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
