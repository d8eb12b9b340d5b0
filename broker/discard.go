package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/partitamq/partita/storage"
)

// discardPrefix starts the name of a replica's directory renamed out of
// its place, to be deleted in the background.
const discardPrefix = ".discarded-"

// discard takes a partition's directory out of its place at once, by
// renaming it beside the others, and deletes it in the background. A
// replica can hold gigabytes, and a replica moved off this node is removed
// under the role lock, which orders every partition's role change here: a
// failover on this node would wait for the deletion. The name is free at
// once for the partition to come back. A node stopped before a deletion
// finished completes it when it opens the topic again (sweepDiscarded).
func (b *Broker) discard(dir string) error {
	trash := filepath.Join(filepath.Dir(dir), fmt.Sprintf("%s%s-%d", discardPrefix, filepath.Base(dir), time.Now().UnixNano()))
	// A journal replay must not bring the old replica's files back under
	// the name the partition takes again.
	if err := storage.Rename(b.cfg.Storage.FS, dir, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	b.removeInBackground(trash)
	return nil
}

// sweepDiscarded deletes in the background what discard left in a topic's
// directory when the node stopped first.
func (b *Broker) sweepDiscarded(topicDir string) {
	left, _ := filepath.Glob(filepath.Join(topicDir, discardPrefix+"*"))
	for _, dir := range left {
		b.removeInBackground(dir)
	}
}

// removeInBackground deletes dir off the caller's goroutine; Close waits
// for it.
func (b *Broker) removeInBackground(dir string) {
	b.discarding.Add(1)
	go func() {
		defer b.discarding.Done()
		if err := os.RemoveAll(dir); err != nil {
			b.log.Warn("deleting a replica's discarded files", "dir", dir, "err", err)
		}
	}()
}
