package node

import (
	"os"
	"path/filepath"
	"time"

	"github.com/partitamq/partita/storage"
)

// openJournal replays what a journal left in the data directory, then
// keeps it with --journal or closes it: a node started without the
// journal still restores what a crash took from the files it covered.
func (n *Node) openJournal() (*storage.Journal, error) {
	if !n.cfg.Journal {
		if _, err := os.Stat(filepath.Join(n.cfg.DataPath, "journal")); os.IsNotExist(err) {
			return nil, nil
		}
	}
	start := time.Now()
	j, rep, err := storage.OpenJournal(n.cfg.DataPath)
	if err != nil {
		return nil, err
	}
	if rep.Records > 0 {
		n.log.Info("journal replayed", "files", rep.Files, "records", rep.Records, "torn_bytes", rep.TornBytes,
			"files_restored", rep.Restored, "bytes_restored", rep.Bytes, "took", time.Since(start))
	}
	if n.cfg.Journal {
		return j, nil
	}
	return nil, j.Close()
}

// checkpointed hears how a journal checkpoint went: its syncfs is timed as
// the node's syncfs; a failure fails the journal.
func (n *Node) checkpointed(took time.Duration, err error) {
	if err != nil {
		n.log.Error("journal checkpoint failed: the journal has failed, partitions fsync their own files, and its files stay for the next start to replay", "err", err)
		return
	}
	n.metrics.ObserveSyncfs(took)
}
