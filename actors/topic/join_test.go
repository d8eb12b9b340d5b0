package topic_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// 12. A replica that caught up joins the ISR only while the leader starts
// no write and has none in flight, and the join increments EpochForWrite:
// the next write is stamped with the new epoch and reaches every member,
// including followers that hear of the new epoch after the leader.
func TestBehaviour12JoinHoldsWritesAndIncrementsEpoch(t *testing.T) {
	before := topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, EpochForWrite: 1, Replicas: 3, Revision: 5}
	after := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 9}
	atJoin := make(chan *topic.Stats, 1)
	release := make(chan struct{})
	var c *memCluster
	built := make(chan struct{}) // n3, empty like the leader, joins at once
	c = newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, func(node string, o *topic.Options) {
		o.Role = before
		if node == "n1" {
			o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
				<-built
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
	close(built)
	repliedA := make(chan topic.Reply, 1)
	go func() { repliedA <- c.publish("a") }()
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
	if r := <-repliedA; r.Err != nil {
		t.Fatalf("publish made as the join began: %v", r.Err)
	}
	if epoch := c.stats("n1").LastEpoch; epoch != 2 {
		t.Fatalf("write after the join stamped with epoch %d, want 2", epoch)
	}

	// The watch delivers the state from before the join late: it must not
	// take n3 out of the writes again.
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: before})
	if st := c.stats("n1"); st.ISR != 3 {
		t.Fatalf("a stale state shrank the leader's ISR to %d", st.ISR)
	}
	if r := c.publish("c"); r.Err != nil {
		t.Fatal(r.Err)
	}
	if c.storeEnd("n3") != c.storeEnd("n1") {
		t.Fatal("a write after a stale state was acknowledged without n3")
	}
	c.stopAndCompare(t, "n2", "n3")
}

func (c *memCluster) healLink(node string) {
	c.mu.Lock()
	c.cut[node] = false
	c.mu.Unlock()
}

// reenabling is a memCluster option: n1 re-enables its writes as the
// metadata would, in the next epoch with the ISR as it stands, and the
// followers hear the new state. *c is read only when writes are re-enabled.
func reenabling(c **memCluster) func(string, *topic.Options) {
	return func(node string, o *topic.Options) {
		if node != "n1" {
			return
		}
		o.Reenable = func(context.Context) (topic.Role, error) {
			m := *c
			m.mu.Lock()
			m.epoch++
			role := topic.Role{Leader: "n1", ISR: append([]string(nil), m.isr...), EpochForWrite: m.epoch, Replicas: 3}
			m.mu.Unlock()
			for _, f := range []string{"n2", "n3"} {
				m.system.Root.Send(m.pids[f], &topic.RoleChanged{Role: role})
			}
			return role, nil
		}
	}
}

// A leader that failed a write for want of a majority disabled its writes;
// it takes writes again only through a new epoch in the metadata, and the
// followers that come back take the writes made in it.
func TestDisabledLeaderTakesWritesAgainThroughANewEpoch(t *testing.T) {
	var c *memCluster
	// --isr-shrink-after well above the 200 ms redial: both followers are
	// back by the time writes are re-enabled, and neither is shrunk out
	// for a redial still under way.
	c = newMemClusterFrom(t, time.Second, 1, storage.Options{}, nil, reenabling(&c))
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.cutLink("n2")
	c.cutLink("n3")
	if r := c.publish("lost"); r.Err == nil || r.Err.Code != "E_FAILED_ON_NOT_WRITABLE" {
		t.Fatalf("reply %+v, want E_FAILED_ON_NOT_WRITABLE", r)
	}
	if st := c.stats("n1"); st.Writable {
		t.Fatal("writable right after a write failed for want of a majority")
	}
	c.healLink("n2")
	c.healLink("n3")
	waitFor(t, "writes to be re-enabled", func() bool { return c.stats("n1").Writable })
	var r topic.Reply
	waitFor(t, "a write to succeed again", func() bool { r = c.publish("after"); return r.Err == nil })
	epoch := c.stats("n1").LastEpoch
	c.mu.Lock()
	newest := c.epoch
	c.mu.Unlock()
	if epoch != newest || newest < 2 {
		t.Fatalf("write after re-enabling stamped with epoch %d; the metadata is at %d", epoch, newest)
	}
	c.stopAndCompare(t, "n2", "n3")
}

// A replica catching up a long log while publishes keep coming gets each
// record about once, not a chunk again for every live write it refuses,
// and joins the ISR.
func TestCatchUpUnderSteadyWritesJoinsWithoutResending(t *testing.T) {
	const history0 = 3000
	before := topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, EpochForWrite: 2, Replicas: 3, Revision: 5}
	after := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 3, Replicas: 3, Revision: 9}
	joined := make(chan int64, 1) // the leader's record count at the join
	var c *memCluster
	c = newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < history0; i++ {
			history(t, store, 2, "m")
		}
	}, func(node string, o *topic.Options) {
		o.Role = before
		if node == "n1" {
			o.JoinISR = func(context.Context, string) (topic.Role, error) {
				st, err := c.statsOf("n1")
				if err != nil {
					t.Error(err)
					st = &topic.Stats{}
				}
				joined <- st.Records
				for _, f := range []string{"n2", "n3"} {
					c.system.Root.Send(c.pids[f], &topic.RoleChanged{Role: after})
				}
				return after, nil
			}
		}
	})
	stop := make(chan struct{})
	var publishers sync.WaitGroup
	for range 4 {
		publishers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r := c.publish("live"); r.Err != nil && r.Err.Code != "E_PUB_TOO_MUCH_WAITING" {
					t.Errorf("publish: %v", r.Err)
					return
				}
			}
		})
	}
	var records int64
	select {
	case records = <-joined:
	case <-time.After(20 * time.Second):
		t.Error("the replica did not join within 20 s of steady writes")
	}
	close(stop)
	publishers.Wait()
	c.mu.Lock()
	sent := c.writes["n3"]
	c.mu.Unlock()
	if records > 0 && int64(sent) > 2*records {
		t.Errorf("the replica was sent %d writes to catch up %d records", sent, records)
	}
	t.Logf("joined at %d records after %d writes sent to the replica", records, sent)
}

// A catch-up push cut off by a broken stream starts again once the stream
// is back, even on an idle partition: the replica joins.
func TestCatchUpResumesAfterTheStreamBreaks(t *testing.T) {
	before := topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, EpochForWrite: 2, Replicas: 3, Revision: 5}
	after := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 3, Replicas: 3, Revision: 9}
	joined := make(chan struct{})
	var c *memCluster
	c = newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < 3000; i++ {
			history(t, store, 2, "m")
		}
	}, func(node string, o *topic.Options) {
		o.Role = before
		if node == "n1" {
			o.JoinISR = func(context.Context, string) (topic.Role, error) {
				close(joined)
				for _, f := range []string{"n2", "n3"} {
					c.system.Root.Send(c.pids[f], &topic.RoleChanged{Role: after})
				}
				return after, nil
			}
		}
	})
	// Writes to n3 after the first (the probe that starts the push) vanish,
	// as when a stream breaks with a chunk on the wire; then the stream is
	// reported down, and up again.
	c.mu.Lock()
	c.limit["n3"] = 1
	c.mu.Unlock()
	waitFor(t, "a chunk of the push lost", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.dropped["n3"] > 0
	})
	c.mu.Lock()
	delete(c.limit, "n3")
	c.mu.Unlock()
	c.breakStreams("n3")
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatalf("the replica did not join after the stream came back (it has %d of %d records)",
			c.stats("n3").Records, c.stats("n1").Records)
	}
}

// A new leader without a majority takes no writes, so the probe it sends a
// replica catching up is its only way to bring that replica back. The
// leader deposed, not told yet, refuses the probe for the epoch; once it
// has heard, the leader must probe it again, or the partition stays
// without writes until some stream reconnects. (A 30-minute fault run at
// 9a63ad4 found a partition stuck so for 30 s: leader alone in the ISR,
// both replicas catching up, nothing sent to them; docs/faults.md, finding
// 8. Then any replica that had not heard refused; since a follower takes
// a later leader's epoch, only a deposed leader does.)
func TestCatchUpProbeRepeatedAfterAnEpochRefusal(t *testing.T) {
	after := topic.Role{Leader: "n2", ISR: []string{"n2"}, Catchup: []string{"n1"}, EpochForWrite: 2, Replicas: 3, Revision: 7}
	c, joined := clusterWithN2JoiningReplicas(t)
	// n2 hears first that it leads; n1, which led, refuses its probe.
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: after})
	waitFor(t, "n1 to refuse the new leader's probe", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.temporary["n1"] > 0
	})
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: after})
	asksToJoin(t, joined, "n1", "the deposed leader that refused the probe for its epoch was never probed again")
}

// A replica catching up that has not heard of a new leader's epoch takes
// it from the leader's probe: the new leader asks for it to join without
// its watch having brought the role.
func TestReplicaCatchingUpTakesTheNewLeadersEpochFromItsProbe(t *testing.T) {
	c, after, joined := leaderGoneN3CatchingUp(t)
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: after})
	asksToJoin(t, joined, "n3", "the replica catching up did not take the new leader's probe")
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.temporary["n3"]; n != 0 {
		t.Fatalf("n3 refused %d writes of the new leader as temporary", n)
	}
}

// leaderGoneN3CatchingUp is a memCluster whose leader n1 committed a write
// and stopped; after is the role that makes n2 leader with n3 catching up,
// handed to neither yet, and joined gets the node n2 asks to join.
func leaderGoneN3CatchingUp(t *testing.T) (c *memCluster, after topic.Role, joined chan string) {
	after = topic.Role{Leader: "n2", ISR: []string{"n2"}, Catchup: []string{"n3"}, EpochForWrite: 2, Replicas: 3, Revision: 7}
	c, joined = clusterWithN2JoiningReplicas(t)
	c.system.Root.PoisonFuture(c.pids["n1"]).Wait()
	return c, after, joined
}

// A new leader probes a replica catching up once its stream to it opens,
// not before: a probe read from the log for a replica whose stream is not
// up yet would wait for the dial (and be dropped with a dial that fails,
// as to a dead node after a failover), and the stream opening probes it
// anyway.
func TestNewLeaderProbesACatchUpReplicaWhenItsStreamOpens(t *testing.T) {
	c, after, joined := leaderGoneN3CatchingUp(t)
	c.mu.Lock()
	before := c.writes["n3"]
	c.mu.Unlock()
	c.system.Root.Send(c.pids["n3"], &topic.RoleChanged{Role: after})
	c.stats("n3") // answered after the role: n3 takes the new epoch's probe
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: after})
	asksToJoin(t, joined, "n3", "the replica catching up was never probed")
	// Whatever else the leader sent n3 it sent when its stream opened,
	// before taking the probe's answer: let it finish its turns first.
	c.stats("n2")
	c.mu.Lock()
	defer c.mu.Unlock()
	if got := c.writes["n3"] - before; got != 1 {
		t.Fatalf("n3 got %d writes from the new leader before it joined, want its one probe", got)
	}
}

// Two replicas catching up on an idle partition both have everything: the
// leader probes both, and both acknowledge at once. Joins go one at a time,
// so the second acknowledgement arrives while the first replica joins; the
// second replica must still join afterwards, though no publish comes to
// make it acknowledge again. (A whole cluster stopped and started again
// was found with its last replica left catching up for good.)
func TestSecondCaughtUpReplicaJoinsAfterTheFirst(t *testing.T) {
	start := topic.Role{Leader: "n1", ISR: []string{"n1"}, Catchup: []string{"n2", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 5}
	asked := make(chan string, 2)
	var c *memCluster
	built := make(chan struct{}) // the probes start before c is assigned
	var mu sync.Mutex
	var isr []string
	c = newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(_ string, store *storage.Partition) {
		history(t, store, 2, "a", "b")
	}, func(node string, o *topic.Options) {
		o.Role = start
		if node != "n1" {
			return
		}
		o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
			<-built
			mu.Lock()
			first := len(isr) == 0
			isr = append(isr, joining)
			role := topic.Role{Leader: "n1", ISR: append([]string{"n1"}, isr...), EpochForWrite: 2 + int64(len(isr)), Replicas: 3, Revision: 5 + int64(len(isr))}
			for _, n := range []string{"n2", "n3"} {
				if !slices.Contains(isr, n) {
					role.Catchup = append(role.Catchup, n)
				}
			}
			mu.Unlock()
			if first {
				// Hold this join until the other replica's acknowledgement
				// of its probe reached the leader and was handled.
				other := map[string]string{"n2": "n3", "n3": "n2"}[joining]
				waitFor(t, other+" to acknowledge its probe", func() bool {
					c.mu.Lock()
					defer c.mu.Unlock()
					return c.acked[other] > 0
				})
				c.stats("n1")
			}
			for _, n := range []string{"n2", "n3"} {
				c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: role})
			}
			asked <- joining
			return role, nil
		}
	})
	close(built)
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case n := <-asked:
			got[n] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("asked to join: %v; a caught-up replica was left catching up", got)
		}
	}
}

// A partition never written to has no record to probe a replica catching
// up with. The leader asks instead whether the replica's log is empty too,
// and one that is joins the ISR with no publish: before, it stayed
// catching up until the first write, and so did every move and drain
// waiting for it.
func TestReplicaOfANeverWrittenPartitionJoinsWithoutAWrite(t *testing.T) {
	_, joined := neverWrittenLeader(t)
	asksToJoin(t, joined, "n2", "the replica of a never-written partition was never asked to join")
}

// A replica that holds records its leader's empty log lacks (a deposed
// leader's writes, never committed) cuts them off on the probe, as the
// leader's first write would, and joins: with one replica in sync of two
// the leader takes no write, so waiting for one would leave the partition
// stuck.
func TestReplicaHoldingWhatAnEmptyLeaderLacksIsCutAndJoins(t *testing.T) {
	c, joined := neverWrittenLeader(t, "n2")
	asksToJoin(t, joined, "n2", "the replica holding what the empty leader lacks was never asked to join")
	if st := c.stats("n2"); st.End != 0 || st.Records != 0 {
		t.Fatalf("n2's log ends at %d with %d records after joining an empty leader, want both 0", st.End, st.Records)
	}
}

// neverWrittenLeader starts n1 leading a partition with an empty log, n2
// catching up and n3 not placed; the nodes in stale hold records n1 never
// had. The channel gets the nodes n1 asks to join, in order.
func neverWrittenLeader(t *testing.T, stale ...string) (*memCluster, <-chan string) {
	start := topic.Role{Leader: "n1", ISR: []string{"n1"}, Catchup: []string{"n2"}, EpochForWrite: 2, Replicas: 2, Revision: 5}
	joined := make(chan string, 4)
	c := newMemClusterFrom(t, 200*time.Millisecond, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if slices.Contains(stale, node) {
			history(t, store, 1, "deposed", "writes")
		}
	}, func(node string, o *topic.Options) {
		o.Role = start
	}, joinsReported(joined, func(joining string) topic.Role {
		return topic.Role{Leader: "n1", ISR: []string{"n1", joining}, EpochForWrite: 3, Replicas: 2, Revision: 6}
	}))
	return c, joined
}

// joinsReported makes n1 put each node it asks to join on joined and
// answer with the role after gives.
func joinsReported(joined chan<- string, after func(joining string) topic.Role) func(string, *topic.Options) {
	return func(node string, o *topic.Options) {
		if node == "n1" {
			o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
				joined <- joining
				return after(joining), nil
			}
		}
	}
}

// asksToJoin waits for the leader to ask the metadata to add want to the
// ISR; never is the failure when it does not within 5 s.
func asksToJoin(t *testing.T, joined <-chan string, want, never string) {
	t.Helper()
	select {
	case n := <-joined:
		if n != want {
			t.Fatalf("%s asked to join, want %s", n, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal(never)
	}
}

// A follower that leaves the ISR while its leader keeps leading (as a
// restarted replica does, to rejoin by catch-up) is probed at once. The
// leader read the replicas catching up before the change from the role it
// had just replaced, so it saw none as new and probed none; on an idle
// partition the replica then waited for its stream to reconnect, about
// 30 s in the fault suite.
func TestReplicaLeavingTheISRUnderTheSameLeaderIsProbed(t *testing.T) {
	left := topic.Role{Leader: "n1", ISR: []string{"n1", "n3"}, Catchup: []string{"n2"}, EpochForWrite: 3, Replicas: 3, Revision: 7}
	joined := make(chan string, 1)
	c := newMemClusterFrom(t, 200*time.Millisecond, 2, storage.Options{}, nil, joinsReported(joined, func(joining string) topic.Role {
		return topic.Role{Leader: "n1", ISR: []string{"n1", "n3", joining}, EpochForWrite: 4, Replicas: 3, Revision: 8}
	}))
	// Committed on all three: the streams to both followers are up, and
	// the leader has heard so, before n2 leaves the ISR.
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, n := range []string{"n2", "n3", "n1"} {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: left})
	}
	asksToJoin(t, joined, "n2", "the replica that left the ISR under the same leader was never probed back in")
}

// A leader whose writes are disabled re-enables them with the followers it
// can reach when they are a majority: a follower still down leaves the ISR
// first instead of keeping the writes disabled until it comes back.
func TestDisabledLeaderShrinksOutAFollowerStillDownAndTakesWrites(t *testing.T) {
	var c *memCluster
	c = newMemClusterFrom(t, 200*time.Millisecond, 1, storage.Options{}, nil, reenabling(&c))
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.mu.Lock()
	c.unreachable = map[string]bool{"n3": true} // dead: its redials fail
	c.mu.Unlock()
	c.cutLink("n2")
	c.cutLink("n3")
	if r := c.publish("lost"); r.Err == nil || r.Err.Code != "E_FAILED_ON_NOT_WRITABLE" {
		t.Fatalf("reply %+v, want E_FAILED_ON_NOT_WRITABLE", r)
	}
	c.healLink("n2")
	waitFor(t, "writes to be re-enabled without n3", func() bool { return c.stats("n1").Writable })
	c.mu.Lock()
	isr := append([]string(nil), c.isr...)
	c.mu.Unlock()
	if !slices.Equal(isr, []string{"n1", "n2"}) {
		t.Fatalf("ISR %v when writes were re-enabled, want [n1 n2]", isr)
	}
	var r topic.Reply
	waitFor(t, "a write to succeed again", func() bool { r = c.publish("after"); return r.Err == nil })
	c.stopAndCompare(t, "n2")
}

// catchingUpN3 is a memCluster where n3 catches up, its dials refused
// until open is set, and joins the ISR once the leader asks; onJoin runs
// first.
func catchingUpN3(t *testing.T, shrinkAfter time.Duration, open *atomic.Bool, onJoin func()) *memCluster {
	before := topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, EpochForWrite: 1, Replicas: 3, Revision: 5}
	after := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 2, Replicas: 3, Revision: 9}
	var c *memCluster
	built := make(chan struct{})
	c = newMemClusterFrom(t, shrinkAfter, 1, storage.Options{}, nil, func(node string, o *topic.Options) {
		o.Role = before
		if node != "n1" {
			return
		}
		dial := o.Dial
		o.Dial = func(ctx context.Context, to string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) (replica.Link, error) {
			if to == "n3" && !open.Load() {
				return nil, errors.New("connection refused")
			}
			return dial(ctx, to, onFrame, onDown)
		}
		o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
			<-built
			onJoin()
			for _, n := range []string{"n2", "n3"} {
				c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: after})
			}
			return after, nil
		}
	})
	close(built)
	return c
}

// An ordered FIN is confirmed on every ISR member, so that a leader
// elected from any of them resumes after it. A replica that caught up has
// been sent the channels' positions only fire-and-forget: before the
// metadata adds it, it holds every ordered channel's position, and FINs
// confirmed while its join is asked wait for it too
// (docs/replication.md#isr-join).
func TestJoiningReplicaHoldsTheOrderedPositions(t *testing.T) {
	var open atomic.Bool
	asking, proceed := make(chan struct{}, 1), make(chan struct{})
	c := catchingUpN3(t, 5*time.Second, &open, func() {
		asking <- struct{}{}
		<-proceed
	})
	c.mu.Lock()
	c.offsetsLost = map[string]bool{"n3": true}
	c.mu.Unlock()

	ordered, _, obox := c.subscribe("ordered", true)
	for _, b := range []string{"a", "b", "c", "d"} {
		if r := c.publish(b); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	confirmed := func() int64 {
		res, err := c.system.Root.RequestFuture(ordered, &channel.StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*channel.Snapshot).Stats.Confirmed
	}
	d := obox.next(t)
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	d = obox.next(t)
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	d = obox.next(t) // the FIN before was confirmed on n2, the ISR's follower

	open.Store(true)
	select {
	case <-asking:
	case <-time.After(10 * time.Second):
		t.Fatal("n3 never asked to join")
	}
	if want, got := confirmed(), c.followerConfirmed("n3", "ordered"); got != want {
		t.Fatalf("n3 asked to join holding the ordered channel at %d, the leader confirmed %d", got, want)
	}
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	obox.next(t) // the FIN was confirmed
	if want, got := confirmed(), c.followerConfirmed("n3", "ordered"); got != want {
		t.Fatalf("a FIN confirmed while n3's join was asked left n3 at %d, the leader at %d", got, want)
	}
	close(proceed)
	if r := c.publish("e"); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// A joining replica that does not acknowledge the ordered positions holds
// the writes no longer than --isr-shrink-after and is not added; it joins
// on a later attempt once it answers.
func TestJoinWithoutThePositionsIsGivenUp(t *testing.T) {
	const shrinkAfter = 300 * time.Millisecond
	var open, joined atomic.Bool
	c := catchingUpN3(t, shrinkAfter, &open, func() { joined.Store(true) })
	c.mu.Lock()
	c.syncsLost = map[string]bool{"n3": true}
	c.mu.Unlock()

	c.subscribe("ordered", true)
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	open.Store(true)
	waitFor(t, "n3 to catch up", func() bool { return c.storeEnd("n3") == c.storeEnd("n1") })
	start := time.Now()
	for time.Since(start) < 3*shrinkAfter {
		if r := c.publish("b"); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if joined.Load() {
		t.Fatal("n3 was added without acknowledging the ordered position")
	}
	c.mu.Lock()
	c.syncsLost["n3"] = false
	c.mu.Unlock()
	waitFor(t, "n3 to join once it answers", func() bool {
		if r := c.publish("c"); r.Err != nil {
			t.Fatal(r.Err)
		}
		return joined.Load()
	})
}

// clusterWithN2JoiningReplicas is a memCluster led by n1 that has
// committed one write; n2, once it leads, lets any replica join its ISR
// in epoch 3, and joined gets each replica it asks to join.
func clusterWithN2JoiningReplicas(t *testing.T) (*memCluster, chan string) {
	joined := make(chan string, 1)
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, func(node string, o *topic.Options) {
		if node == "n2" {
			o.JoinISR = func(_ context.Context, joining string) (topic.Role, error) {
				joined <- joining
				return topic.Role{Leader: "n2", ISR: []string{"n2", joining}, EpochForWrite: 3, Replicas: 3, Revision: 9}, nil
			}
		}
	})
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	return c, joined
}

// A follower's watch may bring a state older than the epoch a leader's
// write already brought it: here the leadership moved n1 → n3 → n1 in
// epochs 2 and 3 while n2 heard of neither. The epoch stays, as a raft
// term never goes back: the deposed epoch-2 leader's channel positions
// are refused, and the epoch-3 leader's writes taken without a pause.
func TestFollowerKeepsAnEpochTakenFromAWriteOverOlderMetadata(t *testing.T) {
	c := newMemCluster(t, 5*time.Second)
	c.subscribe("c", false)
	isr := []string{"n1", "n2", "n3"}
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: topic.Role{Leader: "n1", ISR: isr, EpochForWrite: 3, LeaderSince: 3, Replicas: 3, Revision: 9}})
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: topic.Role{Leader: "n3", ISR: isr, EpochForWrite: 2, LeaderSince: 2, Replicas: 3, Revision: 8}})
	a := c.sendOffset(t, "n2", &messages.ChannelOffsetUpdate{Topic: "t", Channel: "c", Flush: true, AllowBackward: true, SyncId: 99, EpochForWrite: 2})
	if a.GetKind() != messages.ErrorKind_ERROR_KIND_TEMPORARY {
		t.Fatalf("a position of the deposed epoch 2 answered %v %s, want a temporary refusal", a.GetKind(), a.GetText())
	}
	if r := c.publish("b"); r.Err != nil {
		t.Fatalf("write of epoch 3 after n2 heard of epoch 2: %v", r.Err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.temporary["n2"]; n != 0 {
		t.Fatalf("n2 refused %d writes of epoch 3 after its watch brought epoch 2", n)
	}
}
