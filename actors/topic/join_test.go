package topic_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
)

func (c *memCluster) stats(node string) *topic.Stats {
	c.t.Helper()
	res, err := c.system.Root.RequestFuture(c.pids[node], &topic.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	return res.(*topic.Stats)
}

// 12. A replica that caught up joins the ISR only while the leader starts
// no write and has none in flight, and the join increments EpochForWrite:
// the next write is stamped with the new epoch and reaches every member,
// including followers that hear of the new epoch after the leader.
func TestBehaviour12JoinHoldsWritesAndIncrementsEpoch(t *testing.T) {
	before := topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, EpochForWrite: 1, Replicas: 3}
	after := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 2, Replicas: 3}
	atJoin := make(chan *topic.Stats, 1)
	release := make(chan struct{})
	var c *memCluster
	c = newMemClusterFrom(t, 5*time.Second, 1, nil, func(node string, o *topic.Options) {
		o.Role = before
		if node == "n1" {
			o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
				if joining != "n3" {
					t.Errorf("%s asked to join", joining)
				}
				atJoin <- c.stats("n1")
				<-release
				c.system.Root.Send(c.pids["n3"], &topic.RoleChanged{Role: after})
				return after, nil
			}
		}
	})
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	var st *topic.Stats
	select {
	case st = <-atJoin:
	case <-time.After(10 * time.Second):
		t.Fatal("the caught-up replica never asked to join")
	}
	if st.InFlight != 0 || st.Writable {
		t.Fatalf("join asked with %d writes in flight, writable %v", st.InFlight, st.Writable)
	}

	replied := make(chan topic.Reply, 1)
	go func() { replied <- c.publish("b") }()
	waitFor(t, "the publish during the join to queue", func() bool { return c.stats("n1").Waiting > 0 })
	if st := c.stats("n1"); st.InFlight != 0 {
		t.Fatalf("a write started during the join: %d in flight", st.InFlight)
	}
	close(release)
	// n2 hears of the new epoch after the leader: it refuses the first
	// sends, and the leader sends again.
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: after})
	if r := <-replied; r.Err != nil {
		t.Fatalf("publish held during the join: %v", r.Err)
	}
	last, _ := c.stores["n1"].Commits.Last()
	if last.Epoch != 2 {
		t.Fatalf("write after the join stamped with epoch %d, want 2", last.Epoch)
	}
	for _, n := range []string{"n1", "n2", "n3"} {
		c.system.Root.PoisonFuture(c.pids[n]).Wait()
	}
	want := readFile(t, filepath.Join(c.dirs["n1"], "commit.log"))
	for _, n := range []string{"n2", "n3"} {
		if got := readFile(t, filepath.Join(c.dirs[n], "commit.log")); !bytes.Equal(got, want) {
			t.Fatalf("%s commit log differs from the leader's", n)
		}
	}
}
