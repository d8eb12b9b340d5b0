package cluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// A partition with two replicas has one follower in sync and no majority
// to shrink it out with: when the leader's replication sessions are reset
// under writes, the write in flight, which the follower missed while its
// stream was down, is sent to it again once the stream is back, and the
// writes go on within a second, none failing, instead of failing on
// --write-timeout (5 s) and waiting for a new epoch (docs/faults.md,
// finding 14).
func TestSessionResetUnderATwoReplicaTopicDoesNotStallItsWrites(t *testing.T) {
	f := startFaultLab(t)
	if code, body := testnode.Post(t, f.nodes["n1"].HTTP, "/topic/create?topic=pair&partition_num=1&replicator=2", ""); code != 200 {
		t.Fatalf("create pair: %d %s", code, body)
	}
	state := func() (leader string, isr int) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, _, err := f.assign.Get(ctx, "pair", 0)
		if err != nil {
			return "", 0
		}
		return st.Leader, len(st.ISR)
	}
	testnode.Eventually(t, 30*time.Second, "pair/0 with both replicas in sync", func() bool { l, n := state(); return l != "" && n == 2 })
	leader, _ := state()

	var mu sync.Mutex
	var acks []time.Time
	failed := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		pr := partitionProducer{addr: f.tcp(leader)}
		defer pr.close()
		for i := 0; !stopping(stop); i++ {
			err := pr.publish("pair", 0, fmt.Sprintf("pair-%d", i))
			mu.Lock()
			if err == nil {
				acks = append(acks, time.Now())
			} else {
				failed++
			}
			mu.Unlock()
			if err != nil && !wait(stop, 50*time.Millisecond) {
				return
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	acksSince := func(from time.Time) (n int, first time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, at := range acks {
			if at.After(from) {
				if n == 0 {
					first = at
				}
				n++
			}
		}
		return n, first
	}
	testnode.Eventually(t, 30*time.Second, "publishing to pair", func() bool { n, _ := acksSince(time.Time{}); return n >= 100 })

	for round := range 5 {
		testnode.Eventually(t, 30*time.Second, "pair/0 back in sync", func() bool { _, n := state(); return n == 2 })
		f.resetSessions(leader)
		reset := time.Now()
		testnode.Eventually(t, 30*time.Second, "publishes acknowledged after the reset", func() bool { n, _ := acksSince(reset); return n >= 20 })
		_, first := acksSince(reset)
		mu.Lock()
		t.Logf("round %d: first publish acknowledged %v after the reset; %d failed so far", round, first.Sub(reset).Round(time.Millisecond), failed)
		mu.Unlock()
		if d := first.Sub(reset); d > 2*time.Second {
			t.Errorf("round %d: no publish acknowledged for %v after the leader's sessions were reset", round, d.Round(time.Millisecond))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if failed > 0 {
		t.Errorf("%d publishes failed across the resets; the follower came back within a redial each time", failed)
	}
}
