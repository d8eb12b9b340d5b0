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
// the node's syncfs; a failure fails the journal. Each one is logged with
// its time: under spread writes the syncfs takes seconds, and appends
// answer later while it runs, so a latency blip is told from the log.
func (n *Node) checkpointed(took time.Duration, err error) {
	if err != nil && n.journal.Err() != nil {
		n.log.Error("journal checkpoint failed: the journal has failed, commits are refused until the node restarts, and its files stay for that start to replay", "err", err)
		return
	}
	if err != nil {
		n.log.Warn("journal checkpoint could not remove the journal files it covered; the next one removes them", "err", err)
	} else {
		n.log.Info("journal checkpoint", "took", took.Round(time.Millisecond))
	}
	n.metrics.ObserveSyncfs(took)
}
