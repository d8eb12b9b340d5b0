package cluster

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

// A power loss of the whole cluster under the node's journal: every node
// killed with SIGKILL, then every partition file cut back to nothing, as
// a disk that never wrote back what only the journal made durable would
// leave it. Started again (each replays its journal first), the nodes
// deliver every acknowledged message.
func TestJournalRestoresAClusterAfterAPowerLoss(t *testing.T) {
	c := startCluster(t, 3, "--journal", "--journal-checkpoint", "1h", "--sync-timeout", "20ms")
	if code, body := testnode.Post(t, c.nodes["n1"].HTTP, "/topic/create?topic=power&partition_num=3&replicator=3", ""); code != 200 {
		t.Fatalf("creating the topic: %d %s", code, body)
	}
	acked := map[string]bool{}
	for id, n := range c.nodes {
		prod, err := nsq.NewProducer(n.TCP, nsq.NewConfig())
		if err != nil {
			t.Fatal(err)
		}
		prod.SetLoggerLevel(nsq.LogLevelError)
		for i := range 100 {
			body := fmt.Sprintf("%s-%03d", id, i)
			for try := 0; ; try++ {
				err := prod.Publish("power", []byte(body))
				if err == nil {
					break
				}
				if try == 50 {
					t.Fatalf("publishing %s: %v", body, err)
				}
				<-time.After(100 * time.Millisecond) // a partition still electing its first leader
			}
			acked[body] = true
		}
		prod.Stop()
	}
	// Each node's journal holds the last body it wrote, leader or
	// follower; --sync-timeout syncs it within milliseconds.
	for id, n := range c.nodes {
		testnode.Eventually(t, 10*time.Second, id+"'s journal has every write", func() bool {
			files, _ := filepath.Glob(filepath.Join(n.DataPath, "journal", "*.wal"))
			var all strings.Builder
			for _, f := range files {
				b, _ := os.ReadFile(f)
				all.Write(b)
			}
			for body := range acked {
				if !strings.Contains(all.String(), body) {
					return false
				}
			}
			return true
		})
	}
	for _, n := range c.nodes {
		n.Kill(t)
	}
	for id, n := range c.nodes {
		cut := 0
		err := filepath.WalkDir(filepath.Join(n.DataPath, "topics"), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
				return err
			}
			cut++
			return os.Truncate(path, 0)
		})
		if err != nil || cut == 0 {
			t.Fatalf("cutting %s's partition files: %d cut, %v", id, cut, err)
		}
	}
	for id := range c.nodes {
		c.restart(id)
	}
	deliversAll(t, c.lookups(), "power", "after", acked)
}
