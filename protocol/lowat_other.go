//go:build !linux

package protocol

import "net"

// setReadLowWater is Linux's SO_RCVLOWAT (lowat_linux.go); elsewhere the
// reader's wait is not kept quiet.
func setReadLowWater(net.Conn, int) {}
