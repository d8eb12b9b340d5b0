package node

import (
	"log/slog"
	"syscall"
)

// A partition keeps its current segment and its commit log open, and each
// of its channels reads through a file of its own while consumers are on
// it; client connections, replication sessions, etcd and the segment being
// read by a catch-up take the rest.
const (
	filesPerPartition = 3
	filesReserved     = 1024
)

// openFilesNeeded is about how many files a node holding partitions keeps
// open, and whether limit allows it.
func openFilesNeeded(partitions int, limit uint64) (need uint64, ok bool) {
	need = uint64(partitions)*filesPerPartition + filesReserved
	return need, limit >= need
}

// checkOpenFiles says in the log when the open-file limit is too low for
// the partitions this node holds, before running out of descriptors turns
// into failed writes and refused connections. Go itself already raised the
// soft limit to the hard one when the process started, so only the hard
// limit is left to raise, which only the system can.
func checkOpenFiles(log *slog.Logger, partitions int) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("reading the open-file limit", "err", err)
		return
	}
	need, ok := openFilesNeeded(partitions, rl.Cur)
	if ok {
		log.Debug("open-file limit", "limit", rl.Cur, "partitions", partitions, "needed", need)
		return
	}
	log.Warn("the open-file limit is too low for the partitions this node holds: raise its hard limit (ulimit -Hn, or LimitNOFILE= in a systemd unit)",
		"limit", rl.Cur, "hard_limit", rl.Max, "partitions", partitions, "needed_about", need)
}
