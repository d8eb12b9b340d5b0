package topic_test

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// planMove tells node's replica that its leadership is about to move,
// and returns where its answer comes.
func (c *memCluster) planMove(node string, epoch int64, hold time.Duration) chan bool {
	drained := make(chan bool, 1)
	c.mu.Lock()
	pid := c.pids[node]
	c.mu.Unlock()
	c.system.Root.Send(pid, &topic.MovePlanned{Epoch: epoch, For: hold, Reply: func(d bool) { drained <- d }})
	return drained
}

// A leader told a move is planned holds its writes: the write in flight
// commits and is acknowledged, the leader then answers that it is
// drained, and the publish queued meanwhile is refused as never written
// when the move comes, so its node sends it on.
func TestPlannedMoveDrainsTheWritesInFlight(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil)
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.stall("n2", "n3")
	inFlight := make(chan topic.Reply, 1)
	go func() { inFlight <- c.publish("in flight") }()
	waitFor(t, "the write to be in flight", func() bool { return c.stats("n1").InFlight == 1 })

	drained := c.planMove("n1", 1, time.Minute)
	queued := make(chan topic.Reply, 1)
	go func() { queued <- c.publish("queued") }()
	waitFor(t, "a publish to queue behind the hold", func() bool { return c.stats("n1").Waiting == 1 })
	select {
	case d := <-drained:
		t.Fatalf("answered drained %v with a write in flight", d)
	default:
	}
	c.release()
	if r := <-inFlight; r.Err != nil {
		t.Fatalf("the write in flight when the move was planned answered %v", r.Err)
	}
	if !<-drained {
		t.Fatal("answered not drained once the write in flight committed")
	}
	if st := c.stats("n1"); st.InFlight != 0 || st.Waiting != 1 {
		t.Fatalf("after the drain %d writes in flight, %d messages queued; want 0 and 1", st.InFlight, st.Waiting)
	}
	next := topic.Role{Leader: "n2", ISR: []string{"n2", "n1", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 10}
	for _, n := range []string{"n1", "n3", "n2"} {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: next})
	}
	if r := <-queued; r.Err != topic.ErrDeposed {
		t.Fatalf("the publish queued at the move answered %v, want %v", r.Err, topic.ErrDeposed)
	}
	c.stopAndCompare(t, "n1", "n2", "n3")
}

// A hold whose move never comes ends, and the leader writes what queued;
// a replica that does not lead in the epoch named answers at once.
func TestPlannedMoveThatNeverComesEndsTheHold(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil)
	if d := <-c.planMove("n2", 1, time.Minute); d {
		t.Fatal("a follower answered drained")
	}
	if d := <-c.planMove("n1", 7, time.Minute); d {
		t.Fatal("the leader answered drained for an epoch it does not lead in")
	}
	if d := <-c.planMove("n1", 1, 200*time.Millisecond); !d {
		t.Fatal("the leader with nothing in flight answered not drained")
	}
	if r := c.publish("after the hold"); r.Err != nil {
		t.Fatalf("the publish queued behind a hold whose move never came answered %v", r.Err)
	}
	c.stopAndCompare(t, "n1", "n2", "n3")
}

// A hold whose move the controller did not store ends when it says so,
// not when it lapses: the publish queued behind it is written at once.
func TestPlannedMoveNotStoredEndsTheHoldAtOnce(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil)
	if d := <-c.planMove("n1", 1, time.Hour); !d {
		t.Fatal("the leader with nothing in flight answered not drained")
	}
	queued := make(chan topic.Reply, 1)
	go func() { queued <- c.publish("behind the hold") }()
	waitFor(t, "a publish to queue behind the hold", func() bool { return c.stats("n1").Waiting == 1 })
	c.system.Root.Send(c.pids["n1"], &topic.MoveNotStored{})
	if r := <-queued; r.Err != nil {
		t.Fatalf("the publish queued behind a hold whose move was not stored answered %v", r.Err)
	}
	c.stopAndCompare(t, "n1", "n2", "n3")
}
