package replication

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// unreadBytes reports, for the watchdog, whether bytes the peer sent wait
// in c's socket unread: proof that the peer is alive however long the
// reader took to come round to them. Over TLS the encrypted bytes count
// as well. nil when c has no socket to ask.
func unreadBytes(c net.Conn) func() bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return func() bool {
		n := 0
		raw.Control(func(fd uintptr) {
			n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		})
		return n > 0
	}
}
