package node

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
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

// RaiseOpenFileLimit lifts the open-file limit as far as the system
// allows: to fs.nr_open, the kernel's ceiling, when the process may raise
// its hard limit (root, or CAP_SYS_RESOURCE), else to the hard limit. A
// node holds a few files per partition, and thousands of partitions are
// normal, so the common default of 1024, or a container's 20000, runs out.
func RaiseOpenFileLimit(log *slog.Logger) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return
	}
	if ceiling := nrOpen(); ceiling > rl.Max {
		up := syscall.Rlimit{Cur: ceiling, Max: ceiling}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up); err == nil {
			log.Debug("open-file limit raised", "from", rl.Cur, "to", ceiling)
			return
		}
	}
	if rl.Cur < rl.Max {
		up := syscall.Rlimit{Cur: rl.Max, Max: rl.Max}
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up)
	}
}

func nrOpen() uint64 {
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// checkOpenFiles says in the log when the open-file limit is too low for
// the partitions this node holds, before running out of descriptors turns
// into failed writes and refused connections.
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
	log.Warn("the open-file limit is too low for every partition this node holds to be busy at once (idle ones give their files back after --file-idle-timeout): raise the hard limit (ulimit -Hn, or LimitNOFILE= in a systemd unit)",
		"limit", rl.Cur, "hard_limit", rl.Max, "partitions", partitions, "needed_about", need)
}

// fileBudget is how many partition files may hold a descriptor at once:
// the limit less filesReserved for connections, sessions and etcd, and at
// least half of it.
func fileBudget() int64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<40 {
		return 0
	}
	return int64(max(rl.Cur/2, rl.Cur-2*filesReserved))
}
