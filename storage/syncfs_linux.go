package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

func syncfs(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
