//go:build !linux

package storage

import "os"

func syncfs(*os.File) error { return errNoSyncfs }

func fdatasync(f *os.File) error { return f.Sync() }
