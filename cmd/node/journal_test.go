package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// A node with --journal makes its writes durable with the journal alone:
// killed with SIGKILL, its partition files then cut back to nothing, as a
// power loss takes what was never written back, it restores every
// acknowledged message from the journal when it starts again, with the
// journal or without it.
func TestJournalRestoresWhatAPowerLossTookFromTheFiles(t *testing.T) {
	dir := t.TempDir()
	p := testnode.StartProcess(t, dir, "--journal", "--journal-checkpoint=1h", "--sync-timeout=20ms")
	prod, err := nsq.NewProducer(p.TCP, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	acked := map[string]bool{}
	for i := range 200 {
		body := fmt.Sprintf("m%d", i)
		if err := prod.Publish("journaled", []byte(body)); err != nil {
			t.Fatal(err)
		}
		acked[body] = true
	}
	prod.Stop()
	// The journal syncs by --sync-timeout after a write: the last body in
	// its file shows the sync that covers every acknowledged write wrote.
	testnode.Eventually(t, 10*time.Second, "the last publish in the journal", func() bool {
		files, _ := filepath.Glob(filepath.Join(dir, "journal", "*.wal"))
		for _, f := range files {
			if b, err := os.ReadFile(f); err == nil && strings.Contains(string(b), "m199") {
				return true
			}
		}
		return false
	})
	p.Kill(t)

	cut := 0
	err = filepath.WalkDir(filepath.Join(dir, "topics"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		cut++
		return os.Truncate(path, 0)
	})
	if err != nil || cut == 0 {
		t.Fatalf("cutting the partition files back: %d cut, %v", cut, err)
	}

	p2 := testnode.StartProcess(t, dir, "--journal=false")
	got := map[string]bool{}
	testnode.Consume(t, p2.TCP, "journaled", "after-power-loss", 60*time.Second, func(b string) { got[b] = true }, func() bool {
		for b := range acked {
			if !got[b] {
				return false
			}
		}
		return true
	})
	// Started with --journal=false, the node replayed its journal and
	// then closed it: nothing is left to replay.
	if left, _ := filepath.Glob(filepath.Join(dir, "journal", "*.wal")); len(left) != 0 {
		t.Fatalf("journal files %v left on a node with --journal=false", left)
	}
}

// Each journal checkpoint is logged with how long it took, so that answers
// slowed while its syncfs ran can be told from the log.
func TestJournalCheckpointsAreLogged(t *testing.T) {
	p := testnode.StartProcess(t, t.TempDir(), "--journal-checkpoint=100ms", "--log-level", "info")
	prod, err := nsq.NewProducer(p.TCP, nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	defer prod.Stop()
	if err := prod.Publish("checkpointed", []byte("m")); err != nil {
		t.Fatal(err)
	}
	testnode.Eventually(t, 10*time.Second, "a logged checkpoint", func() bool {
		for _, line := range strings.Split(p.Log.String(), "\n") {
			if strings.Contains(line, `level=INFO msg="journal checkpoint" took=`) {
				return true
			}
		}
		return false
	})
}
