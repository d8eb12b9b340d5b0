package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// mountTmpfs mounts a tmpfs of size bytes at dir until the test ends.
func mountTmpfs(t *testing.T, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mounting a tmpfs (the test needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
}

// A node whose partitions live on a filesystem that fills up refuses
// publishes with E_PUB_FAILED naming ENOSPC and answers /ping NOK; once
// space is freed it takes publishes and answers OK again, and a consumer
// then gets every acknowledged message and none that was refused.
func TestFullFilesystemRefusesPublishesUntilSpaceFreed(t *testing.T) {
	data := t.TempDir()
	topics := filepath.Join(data, "topics")
	mountTmpfs(t, topics, 1<<20)
	// The filler leaves room for a few dozen messages.
	filler := filepath.Join(topics, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20-160<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	n := testnode.StartIn(t, data, "--sync-every", "1", "--max-bytes-per-file", "65536")
	prod, err := nsq.NewProducer(n.TCPAddr(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	defer func() { prod.Stop() }()

	body := func(i int) []byte { return []byte(fmt.Sprintf("%06d%s", i, strings.Repeat("x", 8<<10))) }
	acked := map[string]bool{}
	var refused error
	i := 0
	for ; i < 200 && refused == nil; i++ {
		if err := prod.Publish("full", body(i)); err != nil {
			refused = err
			break
		}
		acked[string(body(i)[:6])] = true
	}
	if refused == nil {
		t.Fatal("200 publishes of 8 KiB fit a 160 KiB filesystem")
	}
	if !strings.Contains(refused.Error(), "E_PUB_FAILED") || !strings.Contains(refused.Error(), "no space left on device") {
		t.Fatalf("publish on a full filesystem: %v, want E_PUB_FAILED ... no space left on device", refused)
	}
	if code, text := n.Get(t, "/ping"); code != 500 || !strings.HasPrefix(text, "NOK - ") {
		t.Fatalf("/ping on a full filesystem: %d %q, want 500 NOK", code, text)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// The refused publish closed the connection (nsqd's E_PUB_FAILED is
	// fatal); a new producer publishes, as go-nsq's reconnect races.
	prod.Stop()
	prod, err = nsq.NewProducer(n.TCPAddr(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	for range 5 {
		i++
		if err := prod.Publish("full", body(i)); err != nil {
			t.Fatalf("publish after space was freed: %v", err)
		}
		acked[string(body(i)[:6])] = true
	}
	if code, text := n.Get(t, "/ping"); code != 200 || text != "OK" {
		t.Fatalf("/ping after space was freed: %d %q", code, text)
	}

	got := make(chan string, 1000)
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 50
	c, err := nsq.NewConsumer("full", "check", cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetLoggerLevel(nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		got <- string(m.Body[:6])
		return nil
	}))
	if err := c.ConnectToNSQD(n.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Stop(); <-c.StopChan }()
	seen := map[string]bool{}
	deadline := time.After(20 * time.Second)
	for len(seen) < len(acked) {
		select {
		case id := <-got:
			if !acked[id] {
				t.Fatalf("consumer got message %s, which was never acknowledged", id)
			}
			seen[id] = true
		case <-deadline:
			t.Fatalf("consumer got %d of %d acknowledged messages", len(seen), len(acked))
		}
	}
}
