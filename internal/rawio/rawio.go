// Package rawio reads and writes through system calls that do not tell Go's
// scheduler they might block.
//
// A goroutine entering an ordinary system call wakes the runtime's monitor
// thread when the whole process was idle, so that the monitor could hand
// the goroutine's processor to another thread should the call block. A
// node idle between messages pays that wake on every message: a futex
// call on the message's path, then the monitor thread's wake-up, short
// sleep and return to sleep, competing for a CPU with the other nodes. On
// machines where a system call or a context switch is dear that was the
// largest single cost of a replicated publish after its own reads and
// writes (benchmarks/README.md, "System calls that do not wake the
// monitor").
//
// A read or write of a non-blocking socket never blocks, so this package
// does it with raw system calls, waiting for the socket through the
// runtime's poller as net.Conn does, with the connection's deadlines. A
// write to a regular file usually only copies into the page cache, but can
// block; Pwrite is offered for callers that bound that risk themselves.
// Where raw calls are not supported, Reader and Writer return the
// connection itself and Pwrite reports false.
package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Reader reads c with raw system calls when c is a TCP or Unix socket, and
// is c itself otherwise (a TLS connection, a pipe in a test).
func Reader(c net.Conn) io.Reader {
	if rc := rawConn(c); rc != nil {
		return &reader{c: c, rc: rc}
	}
	return c
}

// Writer writes to c with raw system calls when c is a TCP or Unix socket,
// and is c itself otherwise.
func Writer(c net.Conn) io.Writer {
	if rc := rawConn(c); rc != nil {
		return &writer{c: c, rc: rc}
	}
	return c
}

// TryWrite writes b to c's socket with one write that does not wait for
// room, and returns how much of b went: 0 when c is not a socket or the
// write failed. The caller hands the rest to a goroutine that may wait.
func TryWrite(c syscall.Conn, b []byte) int {
	if len(b) == 0 {
		return 0
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	rc.Write(func(fd uintptr) bool {
		if m, errno := write(fd, b); errno == 0 {
			n = m
		}
		return true // done, written or not: never wait for the poller
	})
	return n
}

func rawConn(c net.Conn) syscall.RawConn {
	if !supported {
		return nil
	}
	var sc syscall.Conn
	switch c := c.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

type reader struct {
	c      net.Conn
	rc     syscall.RawConn
	nowait atomic.Bool
}

// StopWaiting makes reads return io.EOF when the socket holds nothing,
// instead of waiting for more: a server shutting down reads what had
// arrived and no more. A read waiting meanwhile is woken by a read
// deadline the caller sets; the deadline then no longer applies, so a
// command half read when it came is read to its end.
func (r *reader) StopWaiting() { r.nowait.Store(true) }

func (r *reader) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	try := func(fd uintptr) bool {
		n, errno = read(fd, b)
		// On EAGAIN wait for the poller, then read again.
		return errno != syscall.EAGAIN || r.nowait.Load()
	}
	err := r.rc.Read(try)
	if err != nil && r.nowait.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		r.c.SetReadDeadline(time.Time{})
		err = r.rc.Read(try)
	}
	switch {
	case err != nil:
		return 0, opError(r.c, "read", err)
	case errno == syscall.EAGAIN:
		return 0, io.EOF
	case errno != 0:
		return 0, opError(r.c, "read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

type writer struct {
	c  net.Conn
	rc syscall.RawConn
}

func (w *writer) Write(b []byte) (int, error) {
	n := 0
	var errno syscall.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, e := write(fd, b[n:])
			switch e {
			case 0:
				n += m
			case syscall.EAGAIN:
				return false // wait for room, then write the rest
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return n, opError(w.c, "write", err)
	case errno != 0:
		return n, opError(w.c, "write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

func opError(c net.Conn, op string, err error) error {
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
