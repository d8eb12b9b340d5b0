package topic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// A leader deposed with a write in flight drops it: the publisher hears the
// failure at once (and the publisher of one queued behind it hears that it
// was never written), the log loses the uncommitted tail, the node takes the
// new leader's writes at the right offsets, and the old write's timeout,
// due later, does not touch the log it now shares with the new leader.
func TestDeposedLeaderDropsItsUncommittedWrites(t *testing.T) {
	const writeTimeout = 500 * time.Millisecond
	// One write in flight at a time, so the second publish queues.
	oneInFlight := func(_ string, o *topic.Options) { o.Writer.Window = 1 }
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, withWriteTimeout(writeTimeout), oneInFlight)
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
	queued := make(chan topic.Reply, 1)
	go func() { queued <- c.publish("queued behind it") }()
	waitFor(t, "a publish to queue behind it", func() bool { return c.stats("n1").Waiting == 1 })
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
		// Written here, and maybe on the new leader: nowhere else to go.
		if r.Err != topic.ErrLeadershipEnded || r.Err.Elsewhere {
			t.Fatalf("the write in flight at the deposition was answered %v, want %v", r.Err, topic.ErrLeadershipEnded)
		}
	case <-time.After(writeTimeout / 2):
		t.Fatal("the publisher of the write in flight had no answer from the deposed leader")
	}
	// Never written: its node may send it on to the new leader.
	if r := <-queued; r.Err != topic.ErrDeposed || !r.Err.Elsewhere {
		t.Fatalf("the publish queued at the deposition was answered %v, want %v", r.Err, topic.ErrDeposed)
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

// A leader deposed and elected again before its replica actors of the
// first leadership finished stopping (a leadership moved away and back
// within milliseconds) starts new ones, and its writes reach the
// followers: it once found the old actors' names still taken, started
// none, and every write failed at the write timeout.
func TestLeadershipRegainedAtOnceStillReplicates(t *testing.T) {
	const writeTimeout = 2 * time.Second
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, withWriteTimeout(writeTimeout))
	if r := c.publish("first leadership"); r.Err != nil {
		t.Fatal(r.Err)
	}
	for round := range 5 {
		away := topic.Role{Leader: "n2", ISR: []string{"n2", "n1", "n3"}, EpochForWrite: int64(2 + 2*round), Replicas: 3, Revision: int64(10 + 2*round)}
		back := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: away.EpochForWrite + 1, Replicas: 3, Revision: away.Revision + 1}
		c.mu.Lock()
		c.epoch = back.EpochForWrite
		c.mu.Unlock()
		c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: away})
		c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: back})
		for _, n := range []string{"n2", "n3"} {
			c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: back})
		}
		start := time.Now()
		if r := c.publish("leadership", "regained"); r.Err != nil {
			t.Fatalf("round %d: publish to the leader elected again: %v after %v", round, r.Err, time.Since(start))
		}
	}
	c.stopAndCompare(t, "n2", "n3")
}

// A deposed leader that has not heard yet of its successor answers the
// successor's writes as from an epoch it does not know, which the
// successor sends again, not as a refusal that fails them: once its watch
// brings the new role it takes them, and the write commits on the whole
// ISR without waiting for it to be shrunk out.
func TestDeposedLeaderNotYetToldTakesItsSuccessorsWritesLater(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil)
	if r := c.publish("first leadership"); r.Err != nil {
		t.Fatal(r.Err)
	}
	next := topic.Role{Leader: "n2", ISR: []string{"n2", "n1", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 10}
	c.mu.Lock()
	c.epoch = 2
	c.mu.Unlock()
	for _, n := range []string{"n2", "n3"} {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: next})
	}
	done := make(chan topic.Reply, 1)
	start := time.Now()
	go func() { done <- c.publishTo("n2", "second leadership") }()
	waitFor(t, "n1, still leading in its own view, to answer the new leader's write as from an unknown epoch", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.temporary["n1"] > 0
	})
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: next})
	if r := <-done; r.Err != nil {
		t.Fatalf("publish to the new leader: %v", r.Err)
	}
	if took := time.Since(start); took >= 5*time.Second {
		t.Fatalf("the write committed after %v: it waited for the shrink", took)
	}
	if st := c.stats("n2"); st.ISR != 3 || st.Catchup != 0 {
		t.Fatalf("ISR of %d and %d catching up after the write: want all three in sync", st.ISR, st.Catchup)
	}
	c.stopAndCompare(t, "n1", "n3")
}

// An acknowledgement of a write of an earlier leadership, arriving late on
// a stream of that leadership, does not count for a write of this one that
// took the same LogID after the old uncommitted tail was dropped: the
// write commits only on the acks of its own epoch, and here, with its
// frames lost, fails at the write timeout.
func TestAckOfAnEarlierLeadershipDoesNotCommit(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 3, storage.Options{}, nil, withWriteTimeout(500*time.Millisecond))
	if r := c.publish("committed"); r.Err != nil {
		t.Fatal(r.Err)
	}
	next := c.stats("n1").LastLogID + 1
	c.mu.Lock()
	c.hold["n2"], c.hold["n3"] = true, true
	c.mu.Unlock()
	done := make(chan topic.Reply, 1)
	go func() { done <- c.publish("held") }()
	waitFor(t, "the write to be in flight", func() bool { return c.stats("n1").InFlight == 1 })
	for _, n := range []string{"n2", "n3"} {
		c.system.Root.Send(c.pids["n1"], &replica.Acked{Node: n, LogID: next,
			Ack: &messages.ReplicaAck{Topic: "t", LogId: next, EpochForWrite: 2}})
	}
	if st := c.stats("n1"); st.InFlight != 1 || st.LastLogID == next {
		t.Fatalf("after acks of epoch 2 for a write of epoch 3: %d in flight, last committed %d", st.InFlight, st.LastLogID)
	}
	if r := <-done; r.Err == nil {
		t.Fatal("the publish was acknowledged on acks of an earlier leadership")
	}
}

// A follower reported down by a replica actor the partition no longer
// uses (one of an earlier leadership, still stopping) is not taken as
// down: the write in flight to it waits for it as for any slow follower,
// until --isr-shrink-after, rather than shrinking it out of the ISR at
// once.
func TestFollowerDownFromAStoppedReplicaActorIsIgnored(t *testing.T) {
	const shrinkAfter = time.Second
	c := newMemCluster(t, shrinkAfter)
	if r := c.publish("committed"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.mu.Lock()
	c.hold["n2"] = true
	acked := c.acked["n3"]
	c.mu.Unlock()
	done := make(chan topic.Reply, 1)
	start := time.Now()
	go func() { done <- c.publish("waits for n2") }()
	waitFor(t, "n3 to acknowledge the write", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.acked["n3"] > acked
	})
	c.system.Root.Send(c.pids["n1"], &replica.FollowerDown{Node: "n2", Err: errors.New("an old stream broke"), From: actor.NewPID("nonhost", "stopped-replica")})
	if r := <-done; r.Err != nil {
		t.Fatal(r.Err)
	}
	if took := time.Since(start); took < shrinkAfter {
		t.Fatalf("the write committed %v after it began, before n2 could be shrunk out for being slow: the stale report was taken", took)
	}
}

// A leader that was deposed and elected again in states it never applied
// (the watch delivers states in order, but a state the node's own change
// returned can pass them) sees only that the leadership's name changed. It
// ends the first leadership as if it had seen the deposition, so a
// forward chosen while the other node led is refused like any forward to
// an earlier leadership, and writes go on in the new one.
func TestLeadershipRegainedInStatesNeverAppliedEndsTheFirst(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, func(_ string, o *topic.Options) {
		o.Role.LeaderSession = "n1@1"
	})
	if r := c.publish("first leadership"); r.Err != nil {
		t.Fatal(r.Err)
	}
	// n2 led in epoch 2 ("n2@2"); n1 leads again from epoch 3.
	back := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 3, LeaderSession: "n1@3", Replicas: 3, Revision: 12}
	c.mu.Lock()
	c.epoch = back.EpochForWrite
	c.mu.Unlock()
	for _, n := range []string{"n2", "n3", "n1"} {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: back})
	}
	done := make(chan topic.Reply, 1)
	c.system.Root.Send(c.pids["n1"], &topic.Published{Bodies: [][]byte{[]byte("chosen while n2 led")}, SeenEpoch: 2, Reply: func(r topic.Reply) { done <- r }})
	select {
	case r := <-done:
		if r.Err == nil || r.Err.Text != topic.ErrEarlierLeadership.Text {
			t.Fatalf("forward chosen in epoch 2 answered %+v, want %q", r.Err, topic.ErrEarlierLeadership.Text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer to the forward")
	}
	if r := c.publish("second leadership"); r.Err != nil {
		t.Fatalf("publish in the leadership regained: %v", r.Err)
	}
	if st := c.stats("n1"); st.LastEpoch != 3 {
		t.Fatalf("last record in epoch %d, want 3", st.LastEpoch)
	}
	c.stopAndCompare(t, "n2", "n3")
}

// A partition told to stop while roles wait in its mailbox finishes
// stopping. protoactor hands a stopping actor the user messages queued
// behind its stop while it waits for its children; a leadership regained
// there started replica actors that nothing stopped, and the partition's
// stop never completed (a node shutting down with a reassignment in
// flight would wait for it forever).
func TestAPartitionStopsWithARoleQueuedBehindItsStop(t *testing.T) {
	c := newMemCluster(t, time.Minute)
	n1 := c.pids["n1"]
	busy := &heldUp{entered: make(chan struct{}), release: make(chan struct{})}
	c.system.Root.Send(n1, busy)
	select {
	case <-busy.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the partition never took the message that keeps it busy")
	}
	isr := []string{"n1", "n2", "n3"}
	c.system.Root.Send(n1, &topic.RoleChanged{Role: topic.Role{Leader: "n2", ISR: isr, EpochForWrite: 2, Replicas: 3}})
	c.system.Root.Send(n1, &topic.RoleChanged{Role: topic.Role{Leader: "n1", ISR: isr, EpochForWrite: 3, Replicas: 3}})
	stopped := c.system.Root.StopFuture(n1)
	close(busy.release)
	if err := stopped.Wait(); err != nil {
		t.Fatalf("the partition did not stop with roles queued behind its stop: %v", err)
	}
}
