//go:build race

package rawio

import (
	"runtime"
	"unsafe"
)

// ioSync stands for what the kernel passes between a write and a later
// read, as the syscall package's own annotations do, so that the race
// detector sees the order a socket gives to the goroutines on its ends.
var ioSync int64

func raceRead(b []byte) {
	if len(b) > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&b[0]), len(b))
	}
	runtime.RaceAcquire(unsafe.Pointer(&ioSync))
}

func raceWrite(b []byte) {
	runtime.RaceReleaseMerge(unsafe.Pointer(&ioSync))
	if len(b) > 0 {
		runtime.RaceReadRange(unsafe.Pointer(&b[0]), len(b))
	}
}
