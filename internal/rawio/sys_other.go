//go:build !(linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64))

package rawio

import (
	"errors"
	"syscall"
)

const supported = false

func read(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}

func write(fd uintptr, b []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), b)
	if err != nil {
		return 0, err.(syscall.Errno)
	}
	return n, 0
}

// Pwrite writes nothing: raw calls are not supported here.
func Pwrite(uintptr, []byte, int64) (int, error) { return 0, errors.ErrUnsupported }
