package storage

import (
	"io"
	"os"
)

// File is what the segment and commit logs need of an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	Truncate(size int64) error
	Sync() error
	Stat() (os.FileInfo, error)
	Name() string
	Close() error
}

// FS opens a partition's segment and commit-log files. The operating
// system's is the default; tests put a fault-injecting one in its place to
// fail fsyncs or fill the disk.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
}

// OSFS opens files with the os package.
type OSFS struct{}

// OpenFile is os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}
