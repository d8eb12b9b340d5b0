package topic_test

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// A leader deposed with a write in flight drops it: the publisher hears the
// failure at once, the log loses the uncommitted tail, the node takes the
// new leader's writes at the right offsets, and the old write's timeout,
// due later, does not touch the log it now shares with the new leader.
func TestDeposedLeaderDropsItsUncommittedWrites(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, func(_ string, o *topic.Options) {
		o.Writer.WriteTimeout = writeTimeout
	})
	if r := c.publish("committed"); r.Err != nil {
		t.Fatal(r.Err)
	}
	committedEnd := c.storeEnd("n1")
	c.mu.Lock()
	c.hold["n2"], c.hold["n3"] = true, true
	c.mu.Unlock()
	inFlight := make(chan topic.Reply, 1)
	go func() { inFlight <- c.publish("never committed") }()
	waitFor(t, "the write to be in flight", func() bool { return c.stats("n1").InFlight == 1 })
	deposedAt := time.Now()

	next := topic.Role{Leader: "n2", ISR: []string{"n2", "n1", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 10}
	for _, n := range []string{"n1", "n3", "n2"} {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: next})
	}
	c.mu.Lock()
	c.hold["n2"], c.hold["n3"] = false, false
	c.mu.Unlock()
	select {
	case r := <-inFlight:
		if r.Err == nil {
			t.Fatal("the write in flight at the deposition was acknowledged")
		}
	case <-time.After(writeTimeout / 2):
		t.Fatal("the publisher of the write in flight had no answer from the deposed leader")
	}
	if end := c.stores["n1"].Log.End(); end != committedEnd {
		t.Fatalf("the deposed leader's log ends at %d, its committed end is %d", end, committedEnd)
	}
	// Publish through the new leader until well past the old write's
	// timeout.
	for i := 0; time.Since(deposedAt) < 3*writeTimeout; i++ {
		if r := c.publishTo("n2", "after"); r.Err != nil {
			t.Fatalf("publish %d to the new leader: %v", i, r.Err)
		}
	}
	end := c.storeEnd("n1")
	if got := c.stores["n1"].Log.End(); got != end {
		t.Fatalf("the deposed leader's log ends at %d, its committed end is %d", got, end)
	}
	c.stopAndCompare(t, "n2", "n3")
}
