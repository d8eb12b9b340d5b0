package protocol_test

// When a consumer's reader reads its FINs (finreads.go). Lower bounds are
// asserted exactly; an upper bound is the frame deadline.

import (
	"fmt"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// A consumer holding many messages has its FINs read in batches: after a
// FIN, the reader waits --fin-read-delay before reading on, so a command
// sent after the FIN was read is answered no sooner.
func TestFINsGatherWhileTheClientHoldsManyMessages(t *testing.T) {
	const delay, held, tries = 100 * time.Millisecond, 10000, 50
	n := startNode(t, "--fin-read-delay", delay.String(), "--max-rdy-count", fmt.Sprint(held))
	mpubCount(t, n, "gather", held)
	c := consumer(t, n, "gather", "ch", held)
	ids := make([]string, held)
	for i := range ids {
		ids[i] = idText(c.message().ID)
	}
	for i, id := range ids[:tries] {
		start := time.Now()
		c.send("FIN "+id, nil)
		waitStats(t, n, "gather", "ch", "the FIN read", func(s chanStats) bool {
			return len(s.ClientFinished) == 1 && s.ClientFinished[0] == int64(i+1)
		})
		c.pub("gather-probe", []byte("x"))
		if time.Since(start) >= delay {
			return
		}
	}
	t.Fatalf("none of %d FINs, read one at a time from a client holding %d messages, held the reader for %v", tries, held, delay)
}

// A consumer with RDY 1 holds nothing once its FIN is read, so its reader
// never waits: with a delay far past the frame deadline, one wait would
// keep the next message from coming.
func TestFINsReadAtOnceWhenTheClientHoldsNothing(t *testing.T) {
	// Enough one-at-a-time round trips to span several of the rate's
	// windows, so the rule is asked with a rate known.
	const count = 1000
	n := startNode(t, "--fin-read-delay", "1m", "--msg-timeout", "10m")
	mpubCount(t, n, "one", count)
	c := consumer(t, n, "one", "ch", 1)
	for range count {
		c.send("FIN "+idText(c.message().ID), nil)
	}
}

// mpubCount publishes count small messages to topic in one MPUB.
func mpubCount(t *testing.T, n *testnode.Node, topic string, count int) {
	t.Helper()
	bodies := make([][]byte, count)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, "m%d", i)
	}
	p := dial(t, n)
	p.send("MPUB "+topic, mpubBody(bodies...))
	p.response("OK")
	p.conn.Close()
}
