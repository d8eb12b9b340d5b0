package protocol

import (
	"net"
	"syscall"
)

// setReadLowWater makes the kernel signal c readable only once n bytes
// are queued (SO_RCVLOWAT). While a reader waits on purpose, FINs arriving
// then would otherwise each wake the node's poller for nothing. Best
// effort: a connection that cannot take it is read as before.
func setReadLowWater(c net.Conn, n int) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
	})
}
