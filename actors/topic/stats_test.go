package topic_test

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
)

// Tests read a running partition's commit log through its actor's Stats,
// never from its store: the store belongs to the actor's goroutine, and
// its commit log holds no lock for other readers.

// requestStats asks the partition actor pid for its stats.
func requestStats(system *actor.ActorSystem, pid *actor.PID) (*topic.Stats, error) {
	res, err := system.Root.RequestFuture(pid, &topic.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		return nil, err
	}
	return res.(*topic.Stats), nil
}

func statsOf(t *testing.T, system *actor.ActorSystem, pid *actor.PID) *topic.Stats {
	t.Helper()
	st, err := requestStats(system, pid)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (c *memCluster) stats(node string) *topic.Stats {
	c.t.Helper()
	st, err := c.statsOf(node)
	if err != nil {
		c.t.Fatal(err)
	}
	return st
}

// statsOf is stats for a goroutine other than the test's, which must not
// call Fatal.
func (c *memCluster) statsOf(node string) (*topic.Stats, error) {
	c.mu.Lock()
	pid := c.pids[node]
	c.mu.Unlock()
	return requestStats(c.system, pid)
}

// storeEnd is node's committed end.
func (c *memCluster) storeEnd(node string) int64 { return c.stats(node).End }
