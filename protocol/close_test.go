package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// A node shutting down still reads what its clients had sent: a FIN that
// reached the socket while the session's reader was waiting (here in the
// FIN wait of finreads.go) is applied and saved with the channel, so a
// clean restart does not deliver that message again.
func TestCloseAppliesFINsAlreadyReceived(t *testing.T) {
	const held = 20000
	dir := t.TempDir()
	args := []string{"--fin-read-delay", "500ms", "--max-rdy-count", fmt.Sprint(held)}
	n := testnode.StartIn(t, dir, args...)
	mpubCount(t, n, "drain", held)
	c := consumer(t, n, "drain", "ch", held)
	ids := make([]string, held)
	for i := range ids {
		ids[i] = idText(c.message().ID)
	}
	read := func(fins int64) bool {
		return channelStats(t, n, "drain", "ch").ClientFinished[0] == fins
	}
	var sent int64
	for {
		if sent == held/2 {
			t.Fatalf("the reader never waited after %d FINs", sent)
		}
		c.send("FIN "+ids[sent], nil)
		sent++
		waitStats(t, n, "drain", "ch", "a FIN read", func(s chanStats) bool { return len(s.ClientFinished) == 1 })
		deadline := time.Now().Add(100 * time.Millisecond)
		for !read(sent) && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if !read(sent) {
			break // the reader waits with this FIN in its socket
		}
	}
	t.Logf("closing after %d FINs", sent)
	n.Close()

	n = testnode.StartIn(t, dir, args...)
	if got, want := channelStats(t, n, "drain", "ch").Depth, held-sent; got != want {
		t.Fatalf("after a clean restart the channel holds %d messages, want %d: %d FINs sent before the close", got, want, sent)
	}
}
