package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// A discarded replica's directory leaves its place at once, so the
// partition can come back under the same name, and is gone once the
// background deletion is over; what a node stopped before the deletion
// left is deleted when the topic opens again.
func TestDiscardedReplicaLeavesItsPlaceAtOnce(t *testing.T) {
	b := &Broker{log: slog.New(slog.DiscardHandler)}
	topicDir := t.TempDir()
	dir := filepath.Join(topicDir, "3")
	for _, f := range []string{"00000000000000000000.log", "commit.log", filepath.Join("channels", "c.state")} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), make([]byte, 1<<16), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.discard(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the partition's directory is still in its place: %v", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("the partition coming back cannot make its directory: %v", err)
	}
	b.discarding.Wait()
	if left := entries(t, topicDir); len(left) != 1 || left[0] != "3" {
		t.Fatalf("topic directory holds %v after the deletion, want only the new 3", left)
	}
	if err := b.discard(filepath.Join(topicDir, "9")); err != nil {
		t.Fatalf("discarding a directory that is not there: %v", err)
	}

	stale := filepath.Join(topicDir, discardPrefix+"5-1700000000000000000")
	if err := os.MkdirAll(filepath.Join(stale, "channels"), 0o755); err != nil {
		t.Fatal(err)
	}
	b.sweepDiscarded(topicDir)
	b.discarding.Wait()
	if left := entries(t, topicDir); len(left) != 1 || left[0] != "3" {
		t.Fatalf("topic directory holds %v after the sweep, want only 3", left)
	}
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
