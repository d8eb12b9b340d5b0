package topic_test

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// received counts the messages actors receive, by type.
type received struct {
	mu     sync.Mutex
	byType map[string]int
	total  int
	// arrived, when set, hears of every message (becomesQuiet).
	arrived chan struct{}
}

func (r *received) option() actor.PropsOption {
	return actor.WithReceiverMiddleware(func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			if h, ok := env.Message.(*heldUp); ok {
				close(h.entered)
				<-h.release
				return
			}
			r.mu.Lock()
			if r.byType == nil {
				r.byType = map[string]int{}
			}
			r.byType[fmt.Sprintf("%T", env.Message)]++
			r.total++
			if r.arrived != nil {
				select {
				case r.arrived <- struct{}{}:
				default: // one pending signal says as much as many
				}
			}
			r.mu.Unlock()
			next(c, env)
		}
	})
}

// heldUp keeps the actor that takes it busy until release is closed, so
// that a test can queue messages, user and system, behind it.
type heldUp struct{ entered, release chan struct{} }

// tell makes every message signal arrived from now on; nil stops it.
func (r *received) tell(arrived chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.arrived = arrived
}

func (r *received) snapshot() (int, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.byType))
	for k, v := range r.byType {
		out[k] = v
	}
	return r.total, out
}

// becomesQuiet waits, up to a few seconds, for a window in which none of
// the actors counted receives anything; window is many times their
// shortest timer, so a ticker, or a timer re-armed with nothing to do,
// never lets it pass. Each arrival starts the window again.
func becomesQuiet(t *testing.T, window time.Duration, rs ...*received) {
	t.Helper()
	arrived := make(chan struct{}, 1)
	for _, r := range rs {
		r.tell(arrived)
		defer r.tell(nil)
	}
	total := func() (int, []map[string]int) {
		n, types := 0, []map[string]int{}
		for _, r := range rs {
			c, m := r.snapshot()
			n += c
			types = append(types, m)
		}
		return n, types
	}
	start, _ := total()
	quiet := time.NewTimer(window)
	defer quiet.Stop()
	giveUp := time.NewTimer(5 * time.Second)
	defer giveUp.Stop()
	for {
		select {
		case <-arrived:
			quiet.Reset(window)
		case <-quiet.C:
			return
		case <-giveUp.C:
			n, types := total()
			t.Fatalf("actors never idle for %v: %d messages in the last 5s; now %v", window, n-start, types)
		}
	}
}

// Idle partitions, each with a channel, hold no goroutine and receive
// nothing, however many there are; a commit waiting for its fsync is
// synced by --sync-timeout first.
func TestIdlePartitionsHoldNoGoroutineAndReceiveNothing(t *testing.T) {
	const n = 500
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	base := runtime.NumGoroutine()
	recv := &received{}
	pids := make([]*actor.PID, n)
	for i := range n {
		dir := t.TempDir()
		store, _, err := storage.OpenPartition(dir, storage.Options{SyncEvery: 1000, SyncTimeout: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		pids[i] = system.Root.Spawn(topic.Props(topic.Options{
			Topic: "t", Partition: int32(i), Dir: dir, Store: store, Logger: slog.New(slog.DiscardHandler),
			SyncTimeout: 20 * time.Millisecond, PersistEvery: 20 * time.Millisecond,
			Writer:    topic.WriterConfig{ShrinkAfter: 40 * time.Millisecond, WriteTimeout: time.Second},
			Retention: storage.RetentionPolicy{MaxBytes: 1 << 30}, RetentionEvery: 20 * time.Millisecond,
			ActorProps: func(string) []actor.PropsOption { return []actor.PropsOption{recv.option()} },
		}).Configure(recv.option()))
	}
	replies := make(chan topic.Reply, n)
	for _, pid := range pids {
		if _, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
		system.Root.Send(pid, &topic.Published{Bodies: [][]byte{[]byte("m")}, Reply: func(r topic.Reply) { replies <- r }})
	}
	for range n {
		if r := <-replies; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	waitFor(t, "every partition to fsync its commit by --sync-timeout", func() bool {
		for _, pid := range pids {
			if statsOf(t, system, pid).Syncs == 0 {
				return false
			}
		}
		return true
	})
	waitFor(t, fmt.Sprintf("goroutines to settle near %d with %d idle partitions", base, n), func() bool {
		return runtime.NumGoroutine() < base+n/10
	})
	becomesQuiet(t, 300*time.Millisecond, recv)
	for _, pid := range pids {
		system.Root.PoisonFuture(pid).Wait()
	}
}

// A write that a silent follower (its stream up, its acks lost) holds up
// shrinks the ISR after --isr-shrink-after and commits on the rest; then
// the leader goes quiet.
func TestWriteWaitingOnASilentFollowerShrinksTheISR(t *testing.T) {
	const shrinkAfter = 150 * time.Millisecond
	c := newMemClusterFrom(t, shrinkAfter, 1, storage.Options{SyncTimeout: 20 * time.Millisecond}, nil)
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.mu.Lock()
	c.hold["n3"] = true
	c.mu.Unlock()
	start := time.Now()
	if r := c.publish("during"); r.Err != nil {
		t.Fatalf("write held up by a silent follower: %v", r.Err)
	}
	if took := time.Since(start); took < shrinkAfter {
		t.Fatalf("write committed after %v, before --isr-shrink-after (%v) without n3's ack", took, shrinkAfter)
	}
	c.mu.Lock()
	isr := append([]string(nil), c.isr...)
	c.mu.Unlock()
	if strings.Join(isr, ",") != "n1,n2" {
		t.Fatalf("ISR %v, want [n1 n2]", isr)
	}
	becomesQuiet(t, 300*time.Millisecond, c.received["n1"])
}

// An ordered FIN whose offset a silent follower never acknowledges fails at
// --write-timeout.
func TestOrderedFinFailsAtTheWriteTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil, withWriteTimeout(timeout))
	ordered, _, box := c.subscribe("ordered", true)
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	d := box.next(t)
	c.mu.Lock()
	c.hold["n3"] = true
	c.mu.Unlock()
	start := time.Now()
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	select {
	case err := <-box.refused:
		if !strings.Contains(err.Error(), "acknowledged") {
			t.Fatalf("ordered FIN refused with %v", err)
		}
		if took := time.Since(start); took < timeout {
			t.Fatalf("ordered FIN failed after %v, before the write timeout %v", took, timeout)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ordered FIN never failed with an ISR member silent")
	}
}

// orderedFinWaitingOnN3 is a three-node cluster whose leader n1 has an
// ordered channel's FIN waiting for n3, which holds its answers; the write
// timeout is a minute, so nothing but the test's next step ends the wait.
func orderedFinWaitingOnN3(t *testing.T) (*memCluster, *consumerBox) {
	t.Helper()
	c := newMemClusterFrom(t, time.Minute, 1, storage.Options{}, nil, withWriteTimeout(time.Minute))
	ordered, _, box := c.subscribe("ordered", true)
	for _, b := range []string{"a", "b"} {
		if r := c.publish(b); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	d := box.next(t)
	c.mu.Lock()
	c.hold["n3"] = true
	c.mu.Unlock()
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	box.none(t, 100*time.Millisecond) // waiting on n3
	return c, box
}

// An ordered FIN still waiting for a follower when its leader loses the
// leadership fails at once, before the channel delivers anything more:
// the next leader may not hold the position. A leadership lost and
// regained within milliseconds (a leader moved away and back) redelivered
// the FINished message on the same connection with no E_FIN_FAILED before
// it, the FIN failing only at the write timeout.
func TestOrderedFinFailsWhenTheLeadershipEnds(t *testing.T) {
	c, box := orderedFinWaitingOnN3(t)
	isr := []string{"n1", "n2", "n3"}
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: topic.Role{Leader: "n2", ISR: isr, EpochForWrite: 2, Replicas: 3}})
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: topic.Role{Leader: "n1", ISR: isr, EpochForWrite: 3, Replicas: 3}})
	select {
	case err := <-box.refused:
		if !strings.Contains(err.Error(), "leader") {
			t.Fatalf("ordered FIN refused with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the ordered FIN still waits after its leadership ended; the consumer was handed %q", box.events())
	}
	// Leading again, the channel may deliver the next message, but only
	// after the FIN failed.
	if ev := box.events(); len(ev) < 2 || !strings.HasPrefix(ev[1], "refused") {
		t.Fatalf("the consumer was handed %q: something delivered before the FIN waiting when the leadership ended failed", ev)
	}
}

// A leader moved away and back within milliseconds, with an ordered
// consumer that stayed connected: as a follower it took the brief
// leader's full report, which named the position before the message in
// flight, and leading again it confirms that message's FIN on every ISR
// member. The channel then delivers the next message, not the FINished
// one again (the fault suite saw one delivered twice in a row with its FIN
// confirmed between).
func TestOrderedFinAfterALeadershipAwayAndBackDoesNotDeliverAgain(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{}, nil)
	ordered, _, box := c.subscribe("ordered", true)
	for _, b := range []string{"a", "b"} {
		if r := c.publish(b); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	a := box.next(t)
	isr := []string{"n1", "n2", "n3"}
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: topic.Role{Leader: "n2", ISR: isr, EpochForWrite: 2, LeaderSince: 2, Replicas: 3}})
	ack := c.sendOffset(t, "n1", &messages.ChannelOffsetUpdate{Topic: "t", Channel: "ordered", VOffset: 0, VCnt: 0, Flush: true, AllowBackward: true, EpochForWrite: 2})
	if ack.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		t.Fatalf("the brief leader's report answered %v %s", ack.GetKind(), ack.GetText())
	}
	back := topic.Role{Leader: "n1", ISR: isr, EpochForWrite: 3, LeaderSince: 3, Replicas: 3}
	for _, n := range isr {
		c.system.Root.Send(c.pids[n], &topic.RoleChanged{Role: back})
	}
	// Its streams to the followers are up again once its channels' full
	// reports in the new epoch reach them (a write would have the channel
	// read the log again, past the message in flight, hiding the fault).
	waitFor(t, "the regained leadership's reports to reach n2 and n3", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Contains(c.offsetEpochs["n2"], 3) && slices.Contains(c.offsetEpochs["n3"], 3)
	})
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: a.ID})
	select {
	case err := <-box.refused:
		t.Fatalf("the FIN of %d, leading again, refused: %v", a.ID, err)
	case d := <-box.deliveries:
		if d.ID == a.ID {
			t.Fatalf("message %d delivered again right after its FIN was confirmed", a.ID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing delivered after the FIN")
	}
	box.noneRefused(t)
}

// followerConfirmed is where node's copy of a channel has confirmed to.
func (c *memCluster) followerConfirmed(node, name string) int64 {
	c.t.Helper()
	res, err := c.system.Root.RequestFuture(c.pids[node], &topic.ChannelWanted{Name: name}, 5*time.Second).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	snap, err := c.system.Root.RequestFuture(res.(*topic.ChannelReady).PID, &channel.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	return snap.(*channel.Snapshot).Stats.Confirmed
}

// A leader channel's confirmed offset reaches the followers; one that was
// unreachable when the offset moved gets it when its stream connects again,
// with no periodic resend. Every node fsyncs what it committed by
// --sync-timeout, then goes quiet.
func TestChannelOffsetsReachFollowersAndAReconnectedOne(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 1, storage.Options{SyncTimeout: 20 * time.Millisecond}, nil, func(_ string, o *topic.Options) {
		o.PersistEvery = 20 * time.Millisecond
	})
	pid, _, box := c.subscribe("c", false)
	for i := range 3 {
		if r := c.publish(fmt.Sprint(i)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	end := c.storeEnd("n1")
	c.cutLink("n3")
	for range 3 {
		c.system.Root.Send(pid, &channel.Finished{ConsumerID: 1, ID: box.next(t).ID})
	}
	waitFor(t, "n2's channel to confirm the leader's FINs", func() bool { return c.followerConfirmed("n2", "c") == end })
	if got := c.followerConfirmed("n3", "c"); got == end {
		t.Fatal("n3 got the offset over a cut link")
	}
	c.healLink("n3")
	waitFor(t, "n3's channel to confirm the leader's FINs once it reconnected", func() bool { return c.followerConfirmed("n3", "c") == end })
	waitFor(t, "every node to fsync its commits by --sync-timeout", func() bool {
		for n := range c.stores {
			if c.stats(n).Syncs == 0 {
				return false
			}
		}
		return true
	})
	becomesQuiet(t, 300*time.Millisecond, c.received["n1"], c.received["n2"], c.received["n3"])
}

// Retention runs on its own while the log has a segment it could delete,
// and stops waking the partition once only the active one is left.
func TestRetentionRunsUntilOnlyTheActiveSegmentIsLeft(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	dir := t.TempDir()
	store, _, err := storage.OpenPartition(dir, storage.Options{SegmentBytes: 100, SyncTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recv := &received{}
	pid := system.Root.Spawn(topic.Props(topic.Options{
		Topic: "t", Dir: dir, Store: store, Logger: slog.New(slog.DiscardHandler), SyncTimeout: 20 * time.Millisecond,
		Retention: storage.RetentionPolicy{MaxBytes: 1}, RetentionEvery: 20 * time.Millisecond,
	}).Configure(recv.option()))
	for i := range 4 {
		done := make(chan topic.Reply, 1)
		system.Root.Send(pid, &topic.Published{Bodies: [][]byte{[]byte(fmt.Sprint(i, strings.Repeat("x", 80)))}, Reply: func(r topic.Reply) { done <- r }})
		if r := <-done; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if store.Log.Segments() < 3 {
		t.Fatalf("%d segments, want one per record", store.Log.Segments())
	}
	// A channel that confirmed everything lets retention delete it all.
	st := statsOf(t, system, pid)
	if err := storage.SaveChannelState(dir, "c", storage.ChannelState{Confirmed: st.End, ConfirmedCount: st.Committed}); err != nil {
		t.Fatal(err)
	}
	if _, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "retention to delete all but the active segment", func() bool { return store.Log.Segments() == 1 })
	becomesQuiet(t, 300*time.Millisecond, recv)
	system.Root.PoisonFuture(pid).Wait()
}

// A channel a follower opens before the leader's first report of it (its
// metadata watch heard of the channel first) starts where the topic's first
// channel would, not at this replica's end: the leader's copy may have
// started before records this replica already holds, and a failover before
// the report must redeliver them, not skip them. The report moves it on.
func TestFollowerOpensAChannelWhereNothingIsSkipped(t *testing.T) {
	c := newMemCluster(t, 5*time.Second)
	for _, b := range []string{"a", "b"} {
		if r := c.publish(b); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	c.followerConfirmed("n2", "first")
	if got := c.followerConfirmed("n2", "second"); got != 0 {
		t.Fatalf("a follower's second channel starts at %d, want 0 (the first channel's start)", got)
	}
}

// An ordered FIN waiting on a follower that a move then takes out of the
// ISR succeeds without it, well before --write-timeout: the removed node
// deletes its copy rather than answer.
func TestOrderedFinStopsWaitingOnAFollowerMovedOut(t *testing.T) {
	c, box := orderedFinWaitingOnN3(t)
	c.system.Root.Send(c.pids["n1"], &topic.RoleChanged{Role: topic.Role{Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2}})
	select {
	case err := <-box.refused:
		t.Fatalf("ordered FIN refused with %v", err)
	case <-box.deliveries:
	case <-time.After(5 * time.Second):
		t.Fatal("the ordered FIN still waits on n3, out of the ISR")
	}
	box.noneRefused(t)
}

// A channel position of an earlier epoch than a follower knows is a
// deposed leader's: its full report could move the follower's channel back
// past FINs the successor confirmed there, which the follower, elected
// next, would deliver again. The follower refuses it; one of its own epoch
// or a later one moves the channel, back too when it says so, and so does
// one of any epoch since its leader's leadership began.
func TestFollowerRefusesChannelPositionsOfAnEarlierEpoch(t *testing.T) {
	c := newMemClusterFrom(t, 5*time.Second, 5, storage.Options{}, nil)
	pid, _, box := c.subscribe("c", false)
	for i := range 3 {
		if r := c.publish(fmt.Sprint(i)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	end := c.storeEnd("n1")
	for range 3 {
		c.system.Root.Send(pid, &channel.Finished{ConsumerID: 1, ID: box.next(t).ID})
	}
	waitFor(t, "n2's channel to confirm the leader's FINs", func() bool { return c.followerConfirmed("n2", "c") == end })
	c.mu.Lock()
	stamped := slices.Clone(c.offsetEpochs["n2"])
	c.mu.Unlock()
	if len(stamped) == 0 || slices.ContainsFunc(stamped, func(e int64) bool { return e != 5 }) {
		t.Fatalf("the leader's offsets to n2 were stamped %v, want epoch 5 on each", stamped)
	}

	report := func(epoch int64) *messages.ReplicaAck {
		return c.sendOffset(t, "n2", &messages.ChannelOffsetUpdate{
			Topic: "t", Channel: "c", VOffset: 0, VCnt: 0, Flush: true,
			AllowBackward: true, NeedUpdateConfirmed: true, SyncId: 99, EpochForWrite: epoch,
		})
	}
	if a := report(4); a.GetKind() != messages.ErrorKind_ERROR_KIND_TEMPORARY {
		t.Fatalf("a position of epoch 4 answered %v %s, want a temporary refusal", a.GetKind(), a.GetText())
	}
	if got := c.followerConfirmed("n2", "c"); got != end {
		t.Fatalf("a deposed leader's report moved n2's channel to %d, it confirmed %d", got, end)
	}
	if a := report(6); a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		t.Fatalf("a position of a later epoch answered %v %s", a.GetKind(), a.GetText())
	}
	if got := c.followerConfirmed("n2", "c"); got != 0 {
		t.Fatalf("a later leader's report left n2's channel at %d, it moves back to 0", got)
	}

	// A join raises the epoch to 7 at n2 under the leadership begun in 5,
	// before its leader has heard: that leader's positions still count.
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 7, LeaderSince: 5, Replicas: 3}})
	if a := report(5); a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		t.Fatalf("a position of the present leadership's epoch 5 after a bump to 7 answered %v %s", a.GetKind(), a.GetText())
	}
	if a := report(4); a.GetKind() != messages.ErrorKind_ERROR_KIND_TEMPORARY {
		t.Fatalf("a position of epoch 4, before the leadership began, answered %v %s, want a temporary refusal", a.GetKind(), a.GetText())
	}
}

// sendOffset sends node a leader's channel position as its stream would,
// and returns the node's answer.
func (c *memCluster) sendOffset(t *testing.T, node string, u *messages.ChannelOffsetUpdate) *messages.ReplicaAck {
	t.Helper()
	acked := make(chan *messages.ReplicaAck, 1)
	c.system.Root.Send(c.pids[node], &topic.OffsetArrived{Update: u, Reply: func(a *messages.ReplicaAck) { acked <- a }})
	select {
	case a := <-acked:
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not answer a position of channel %s, epoch %d", node, u.GetChannel(), u.GetEpochForWrite())
		return nil
	}
}
