package protocol

import (
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
	"golang.org/x/sys/unix"
)

// onFD runs f on c's descriptor.
func onFD(t *testing.T, c net.Conn, f func(fd int) error) {
	t.Helper()
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		t.Fatal(err)
	}
	if ferr != nil {
		t.Fatal(ferr)
	}
}

// readable asks the kernel, without waiting, whether c would be signalled
// readable to the node's poller.
func readable(t *testing.T, c net.Conn) bool {
	t.Helper()
	var n int
	onFD(t, c, func(fd int) (err error) {
		n, err = unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return err
	})
	return n == 1
}

// queued is how many bytes c's receive queue holds.
func queued(t *testing.T, c net.Conn) int {
	t.Helper()
	var n int
	onFD(t, c, func(fd int) (err error) {
		n, err = unix.IoctlGetInt(fd, unix.SIOCINQ)
		return err
	})
	return n
}

func TestReadLowWaterHoldsBackAFewFINs(t *testing.T) {
	client, server := loopback.Pair(t)

	setReadLowWater(server, quietLowWater)
	fins := []byte("FIN 0000000000000001\nFIN 0000000000000002\n")
	if _, err := client.Write(fins); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for queued(t, server) < len(fins) {
		if time.Now().After(deadline) {
			t.Fatalf("the FINs never reached the server's receive queue")
		}
		runtime.Gosched()
	}
	if readable(t, server) {
		t.Fatalf("two FINs queued under a %d-byte low-water mark: signalled readable", quietLowWater)
	}
	setReadLowWater(server, 1)
	if !readable(t, server) {
		t.Fatalf("low-water mark back at 1 with two FINs sent: not readable")
	}
	buf := make([]byte, len(fins))
	server.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := server.Read(buf); err != nil || n != len(fins) {
		t.Fatalf("read %d bytes, %v; want the two FINs", n, err)
	}
}
