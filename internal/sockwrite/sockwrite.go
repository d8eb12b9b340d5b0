// Package sockwrite writes to a socket without waiting for room in it, for
// goroutines that must never block on a peer: an actor's turn, or a reader
// that serves other connections' partitions.
package sockwrite

import "syscall"

// Try writes b to c's socket with one write that does not wait for room,
// and returns how much of b went; 0 when c is not a socket or the write
// failed. The caller hands the rest to a goroutine that may wait.
func Try(c syscall.Conn, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Write(func(fd uintptr) bool {
		if m, err := syscall.Write(int(fd), b); err == nil {
			n = m
		}
		return true // done, written or not: never wait for the poller
	})
	return n
}
