// pwrite's 64-bit offset is one register only on 64-bit machines; 32-bit
// Linux takes it in two (and on some in an aligned pair), so raw calls are
// made on 64-bit Linux alone.

//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package rawio

import (
	"syscall"
	"unsafe"
)

const supported = true

// read is read(2) as a raw system call, retried on EINTR.
func read(fd uintptr, b []byte) (int, syscall.Errno) {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		raceRead(b[:n])
		return int(n), 0
	}
}

// write is write(2) as a raw system call, retried on EINTR.
func write(fd uintptr, b []byte) (int, syscall.Errno) {
	raceWrite(b)
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		if e == syscall.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// Pwrite writes all of b to fd at off with raw pwrite(2) calls, and
// reports how much went and the error that stopped it: errors.ErrUnsupported,
// with nothing written, where raw calls are not supported.
func Pwrite(fd uintptr, b []byte, off int64) (int, error) {
	raceWrite(b)
	n := 0
	for n < len(b) {
		m, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[n])), uintptr(len(b)-n), uintptr(off+int64(n)), 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return n, e
		case m == 0:
			return n, syscall.EIO
		}
		n += int(m)
	}
	return n, nil
}
