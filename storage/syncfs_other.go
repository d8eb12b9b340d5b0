//go:build !linux

package storage

import "os"

func syncfs(*os.File) error { return errNoSyncfs }
