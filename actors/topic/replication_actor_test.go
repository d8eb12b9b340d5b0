package topic_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// An in-memory cluster of one leader and two followers, linked by an
// in-memory transport that hands frames straight to the follower actors.
type memCluster struct {
	t      *testing.T
	system *actor.ActorSystem
	dirs   map[string]string
	stores map[string]*storage.Partition
	pids   map[string]*actor.PID

	mu    sync.Mutex
	isr   []string
	epoch int64
	cut   map[string]bool
	hold  map[string]bool // frames to this node vanish, the link stays up
	// stalled holds back the answers of the nodes named until release.
	stalled        map[string]bool
	stalledAnswers []func()
	// writes counts the replica writes delivered to each node; past
	// limit, when set, writes to the node vanish and count as dropped.
	writes, limit, dropped map[string]int
	// temporary counts each node's refusals of kind TEMPORARY, acked its
	// acknowledgements of writes.
	temporary, acked map[string]int
	// received counts the messages each node's partition and channel
	// actors receive.
	received map[string]*received
	// links are the streams dialled to each node, the newest last.
	links map[string][]*memLink
	// unreachable nodes refuse dials, as a dead node's port does.
	unreachable map[string]bool
	// offsetsLost: channel offsets sent to the node fire-and-forget (no
	// sync ID) vanish, as they may on a session that breaks.
	offsetsLost map[string]bool
	// syncsLost: channel offsets sent to the node with a sync ID vanish.
	syncsLost map[string]bool
	// offsetEpochs are the epochs the channel offsets sent to each node
	// were stamped with.
	offsetEpochs map[string][]int64
}

type memLink struct {
	c      *memCluster
	node   string
	onDown func(error)
	once   sync.Once
	done   atomic.Bool
}

func (l *memLink) Send(f *messages.LeaderFrame) error {
	l.c.mu.Lock()
	cut := l.c.cut[l.node]
	l.c.mu.Unlock()
	if cut || l.done.Load() {
		l.down(errors.New("link cut"))
		return errors.New("link cut")
	}
	return nil
}

func (l *memLink) down(err error) {
	l.once.Do(func() { l.done.Store(true); l.onDown(err) })
}

func (l *memLink) Close() { l.done.Store(true) }

func (l *memLink) TakesFrames() bool { return true }

// breakStreams ends every stream dialled to node, as a broken session
// does: the replica actors report the follower down and dial again.
func (c *memCluster) breakStreams(node string) {
	c.mu.Lock()
	links := c.links[node]
	c.links[node] = nil
	c.mu.Unlock()
	for _, l := range links {
		l.down(errors.New("stream broke"))
	}
}

// stall holds back the followers' answers to the leader; release hands
// them over, in order.
func (c *memCluster) stall(nodes ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stalled == nil {
		c.stalled = map[string]bool{}
	}
	for _, n := range nodes {
		c.stalled[n] = true
	}
}

func (c *memCluster) release() {
	c.mu.Lock()
	clear(c.stalled)
	held := c.stalledAnswers
	c.stalledAnswers = nil
	c.mu.Unlock()
	for _, answer := range held {
		answer()
	}
}

// withWriteTimeout is a memCluster option: every node's --write-timeout.
func withWriteTimeout(d time.Duration) func(string, *topic.Options) {
	return func(_ string, o *topic.Options) { o.Writer.WriteTimeout = d }
}

func newMemCluster(t *testing.T, shrinkAfter time.Duration) *memCluster {
	return newMemClusterFrom(t, shrinkAfter, 1, storage.Options{}, nil)
}

// newMemClusterFrom starts the cluster in epoch with each node's log as
// prefill left it.
func newMemClusterFrom(t *testing.T, shrinkAfter time.Duration, epoch int64, storeOpt storage.Options, prefill func(node string, store *storage.Partition), opts ...func(node string, o *topic.Options)) *memCluster {
	c := &memCluster{
		t:      t,
		system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) })),
		dirs:   map[string]string{},
		stores: map[string]*storage.Partition{},
		pids:   map[string]*actor.PID{},
		isr:    []string{"n1", "n2", "n3"},
		cut:    map[string]bool{},
		hold:   map[string]bool{},
		writes: map[string]int{}, limit: map[string]int{}, dropped: map[string]int{},
		temporary: map[string]int{}, acked: map[string]int{},
		received: map[string]*received{},
	}
	t.Cleanup(c.system.Shutdown)
	c.epoch = epoch
	role := topic.Role{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, EpochForWrite: epoch, Replicas: 3}
	for _, n := range []string{"n3", "n2", "n1"} { // followers first, so the leader can reach them
		dir := t.TempDir()
		store, _, err := storage.OpenPartition(dir, storeOpt)
		if err != nil {
			t.Fatal(err)
		}
		c.dirs[n], c.stores[n] = dir, store
		if prefill != nil {
			prefill(n, store)
		}
		o := topic.Options{
			Topic:     "t",
			Partition: 0,
			Dir:       dir,
			Store:     store,
			Writer:    topic.WriterConfig{Window: 8, ShrinkAfter: shrinkAfter, WriteTimeout: 3 * time.Second},
			Logger:    slog.New(slog.DiscardHandler),
			Node:      n,
			Role:      role,
			Dial:      c.dial,
			ShrinkISR: c.shrink,
		}
		recv := &received{}
		c.received[n] = recv
		o.ActorProps = func(kind string) []actor.PropsOption {
			if kind == "channel" {
				return []actor.PropsOption{recv.option()}
			}
			return nil
		}
		for _, opt := range opts {
			opt(n, &o)
		}
		pid := c.system.Root.Spawn(topic.Props(o).Configure(recv.option()))
		c.mu.Lock()
		c.pids[n] = pid
		c.mu.Unlock()
	}
	// Registered after the temporary directories, so it runs before they
	// are removed: a partition still running would write its channels'
	// state into a directory the test already gave back.
	t.Cleanup(c.stop)
	return c
}

func (c *memCluster) dial(_ context.Context, node string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) (replica.Link, error) {
	l := &memLink{c: c, node: node, onDown: onDown}
	c.mu.Lock()
	if c.unreachable[node] {
		c.mu.Unlock()
		return nil, errors.New("connection refused")
	}
	to := c.pids[node]
	if c.links == nil {
		c.links = map[string][]*memLink{}
	}
	c.links[node] = append(c.links[node], l)
	c.mu.Unlock()
	return &forwardingLink{memLink: l, to: to, root: c.system.Root, onFrame: onFrame}, nil
}

// forwardingLink delivers writes to the follower actor and its acks back.
type forwardingLink struct {
	*memLink
	to      *actor.PID
	root    *actor.RootContext
	onFrame func(*messages.FollowerFrame, bool)
	mu      sync.Mutex
}

func (l *forwardingLink) Send(f *messages.LeaderFrame) error {
	if err := l.memLink.Send(f); err != nil {
		return err
	}
	ws := f.GetWrites().GetWrites()
	if w := f.GetWrite(); w != nil {
		ws = []*messages.ReplicaWrite{w}
	}
	l.c.mu.Lock()
	held := l.c.hold[l.node]
	if !held {
		// A limit lets the follower get the frame's writes up to it and
		// drops the rest, as a connection cut mid-stream would.
		if lim := l.c.limit[l.node]; lim > 0 && len(ws) > 0 {
			keep := max(0, min(len(ws), lim-l.c.writes[l.node]))
			l.c.dropped[l.node] += len(ws) - keep
			ws = ws[:keep]
			held = keep == 0
		}
		l.c.writes[l.node] += len(ws)
	}
	l.c.mu.Unlock()
	if held {
		return nil
	}
	switch {
	case f.GetWrite() != nil:
		l.root.Send(l.to, &topic.ReplicaWriteArrived{Write: f.GetWrite(), Reply: func(a *messages.ReplicaAck) {
			l.answer([]*messages.ReplicaAck{a}, 1, &messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: a}})
		}})
	case len(ws) > 0:
		l.root.Send(l.to, &topic.ReplicaWritesArrived{Writes: ws, Reply: func(acks []*messages.ReplicaAck) {
			l.answer(acks, len(ws), &messages.FollowerFrame{Body: &messages.FollowerFrame_Acks{Acks: &messages.ReplicaAcks{Acks: acks}}})
		}})
	case f.GetOffset() != nil:
		l.c.mu.Lock()
		if l.c.offsetEpochs == nil {
			l.c.offsetEpochs = map[string][]int64{}
		}
		l.c.offsetEpochs[l.node] = append(l.c.offsetEpochs[l.node], f.GetOffset().GetEpochForWrite())
		synced := f.GetOffset().GetSyncId() != 0
		lost := l.c.offsetsLost[l.node] && !synced || l.c.syncsLost[l.node] && synced
		l.c.mu.Unlock()
		if lost {
			return nil
		}
		var reply func(*messages.ReplicaAck)
		if f.GetOffset().GetSyncId() != 0 {
			reply = func(a *messages.ReplicaAck) {
				l.answer(nil, 0, &messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: a}})
			}
		}
		l.root.Send(l.to, &topic.OffsetArrived{Update: f.GetOffset(), Reply: reply})
	}
	return nil
}

// answer counts the follower's answer to n writes (acked: each write not
// refused) and hands it to the leader's side of the link.
func (l *forwardingLink) answer(acks []*messages.ReplicaAck, n int, f *messages.FollowerFrame) {
	if l.done.Load() {
		return
	}
	l.c.mu.Lock()
	if l.c.stalled[l.node] {
		l.c.stalledAnswers = append(l.c.stalledAnswers, func() { l.answer(acks, n, f) })
		l.c.mu.Unlock()
		return
	}
	for _, a := range acks {
		if a.GetKind() == messages.ErrorKind_ERROR_KIND_TEMPORARY {
			l.c.temporary[l.node]++
		}
		if a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
			n--
		}
	}
	l.c.acked[l.node] += max(n, 0)
	l.c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onFrame(f, false)
}

func (c *memCluster) shrink(_ context.Context, remove []string) (topic.Role, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var isr, catchup []string
	for _, n := range c.isr {
		drop := false
		for _, r := range remove {
			drop = drop || r == n
		}
		if drop {
			catchup = append(catchup, n)
		} else {
			isr = append(isr, n)
		}
	}
	c.isr = isr
	return topic.Role{Leader: "n1", ISR: append([]string(nil), isr...), Catchup: catchup, EpochForWrite: c.epoch, Replicas: 3}, nil
}

func (c *memCluster) cutLink(node string) {
	c.mu.Lock()
	c.cut[node] = true
	c.mu.Unlock()
}

func (c *memCluster) publish(bodies ...string) topic.Reply {
	return c.publishTo("n1", bodies...)
}

func (c *memCluster) publishTo(node string, bodies ...string) topic.Reply {
	bs := make([][]byte, len(bodies))
	for i, b := range bodies {
		bs[i] = []byte(b)
	}
	done := make(chan topic.Reply, 1)
	c.mu.Lock()
	leader := c.pids[node]
	c.mu.Unlock()
	c.system.Root.Send(leader, &topic.Published{Bodies: bs, Reply: func(r topic.Reply) { done <- r }})
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		c.t.Fatal("no reply to a publish")
		return topic.Reply{}
	}
}

// A publish is acknowledged only once both followers have committed it.
func TestReplicatedPublishAckedOnlyWhenOnEveryISRMember(t *testing.T) {
	c := newMemCluster(t, time.Second)
	for i := 0; i < 20; i++ {
		r := c.publish(fmt.Sprint(i), "x")
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		leaderEnd := c.storeEnd("n1")
		for _, f := range []string{"n2", "n3"} {
			if end := c.storeEnd(f); end != leaderEnd {
				t.Fatalf("publish %d acknowledged while %s is at %d, leader at %d", i, f, end, leaderEnd)
			}
		}
	}
}

// After concurrent PUB and MPUB from several publishers the commit logs of
// the leader and both followers are byte-identical.
func TestReplicatedCommitLogsIdentical(t *testing.T) {
	c := newMemCluster(t, time.Second)
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				bodies := []string{fmt.Sprintf("%d-%d", p, i)}
				if i%3 == 0 {
					bodies = append(bodies, "a", "b", "c")
				}
				if r := c.publish(bodies...); r.Err != nil {
					t.Error(r.Err)
					return
				}
			}
		}(p)
	}
	wg.Wait()
	c.stopAndCompare(t, "n2", "n3")
}

// stopAndCompare stops every node's actor (so their files are flushed and
// closed) and fails unless each of the given followers' commit log equals
// the leader's, byte for byte, and is not empty.
func (c *memCluster) stopAndCompare(t *testing.T, followers ...string) {
	t.Helper()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.system.Root.PoisonFuture(c.pids[n]).Wait()
	}
	want := readFile(t, filepath.Join(c.dirs["n1"], "commit.log"))
	if len(want) == 0 {
		t.Fatal("empty commit log")
	}
	for _, f := range followers {
		if got := readFile(t, filepath.Join(c.dirs[f], "commit.log")); !bytes.Equal(got, want) {
			t.Fatalf("%s commit log differs from the leader's (%d vs %d bytes)", f, len(got), len(want))
		}
	}
}

// Losing one follower of three shrinks the ISR after --isr-shrink-after and
// the waiting write completes; later writes commit on the smaller ISR.
func TestOneFollowerLostShrinksISRAndWritesContinue(t *testing.T) {
	c := newMemCluster(t, 200*time.Millisecond)
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.cutLink("n3")
	start := time.Now()
	if r := c.publish("during"); r.Err != nil {
		t.Fatalf("write during the shrink failed: %v", r.Err)
	}
	t.Logf("write completed %v after the follower was lost", time.Since(start))
	c.mu.Lock()
	isr := append([]string(nil), c.isr...)
	c.mu.Unlock()
	if len(isr) != 2 || isr[0] != "n1" || isr[1] != "n2" {
		t.Fatalf("ISR %v, want [n1 n2]", isr)
	}
	if r := c.publish("after"); r.Err != nil {
		t.Fatal(r.Err)
	}
}

// Losing two followers of three fails the write with
// E_FAILED_ON_NOT_WRITABLE and rolls it back before anyone can read it.
func TestTwoFollowersLostFailsAndRollsBack(t *testing.T) {
	c := newMemCluster(t, 200*time.Millisecond)
	if r := c.publish("before"); r.Err != nil {
		t.Fatal(r.Err)
	}
	endBefore := c.storeEnd("n1")
	c.cutLink("n2")
	c.cutLink("n3")
	r := c.publish("lost")
	if r.Err == nil || r.Err.Code != "E_FAILED_ON_NOT_WRITABLE" {
		t.Fatalf("reply %+v, want E_FAILED_ON_NOT_WRITABLE", r)
	}
	if end := c.storeEnd("n1"); end != endBefore {
		t.Fatalf("committed end moved from %d to %d", endBefore, end)
	}
	// The rollback is performed before the failure is answered.
	if end := c.stores["n1"].Log.End(); end != endBefore {
		t.Fatalf("log end %d not rolled back to %d", end, endBefore)
	}
	if r := c.publish("refused"); r.Err == nil {
		t.Fatal("a stepped-down leader accepted a write")
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// consumerBox is a channel.Outbox that records what a consumer receives.
type consumerBox struct {
	deliveries chan channel.Delivery
	refused    chan error

	// seen names each delivery and refusal in the order the channel made
	// them: a test waiting on both channels at once cannot tell which came
	// first when both have something by the time it looks.
	mu   sync.Mutex
	seen []string
}

func (b *consumerBox) Deliver(_ string, _ int32, ds []channel.Delivery) {
	for _, d := range ds {
		b.record(fmt.Sprintf("delivered %d", d.ID))
		b.deliveries <- d
	}
}

func (b *consumerBox) Refused(_ string, _ uint64, err error) {
	b.record("refused: " + err.Error())
	b.refused <- err
}

func (b *consumerBox) record(event string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = append(b.seen, event)
}

// noneRefused fails the test if the consumer was refused anything so far,
// even where a delivery came after the refusal and was seen first.
func (b *consumerBox) noneRefused(t *testing.T) {
	t.Helper()
	for _, ev := range b.events() {
		if strings.HasPrefix(ev, "refused") {
			t.Fatalf("the consumer was handed %q", b.events())
		}
	}
}

// events is what the consumer has been handed so far, in order.
func (b *consumerBox) events() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

func (b *consumerBox) ChannelGone() {}

// subscribe opens channel name on the leader and returns a consumer of it.
// stop stops every node's partition actor and waits for it; one the test
// already stopped is let be.
func (c *memCluster) stop() {
	c.mu.Lock()
	pids := make([]*actor.PID, 0, len(c.pids))
	for _, pid := range c.pids {
		pids = append(pids, pid)
	}
	c.mu.Unlock()
	for _, pid := range pids {
		if err := c.system.Root.StopFuture(pid).Wait(); err != nil {
			c.t.Errorf("stopping %v: %v", pid, err)
		}
	}
}

func (c *memCluster) subscribe(name string, ordered bool) (*actor.PID, *channel.Consumer, *consumerBox) {
	c.mu.Lock()
	leader := c.pids["n1"]
	c.mu.Unlock()
	res, err := c.system.Root.RequestFuture(leader, &topic.ChannelWanted{Name: name}, 5*time.Second).Result()
	if err != nil {
		c.t.Fatal(err)
	}
	pid := res.(*topic.ChannelReady).PID
	if ordered {
		c.system.Root.Send(pid, &channel.OrderChanged{Ordered: true})
	}
	box := &consumerBox{deliveries: make(chan channel.Delivery, 100), refused: make(chan error, 100)}
	cons := &channel.Consumer{ID: 1, MsgTimeout: time.Minute, Out: box}
	cons.SetChannels([]*actor.PID{pid})
	cons.SetRDY(10)
	c.system.Root.Send(pid, &channel.Subscribed{Consumer: cons})
	return pid, cons, box
}

func (b *consumerBox) next(t *testing.T) channel.Delivery {
	t.Helper()
	select {
	case d := <-b.deliveries:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
		return channel.Delivery{}
	}
}

// finOK FINs a message and checks that it is not refused: the next message
// arrives first (a refusal would come before it on an ordered channel).
func (b *consumerBox) none(t *testing.T, within time.Duration) {
	t.Helper()
	select {
	case err := <-b.refused:
		t.Fatalf("refused: %v", err)
	case <-time.After(within):
	}
}

// Behaviour 18 (docs/replication.md#offset-replication): a normal channel's
// FIN succeeds with every replica down; an ordered channel's FIN fails while
// an ISR member cannot acknowledge the offset, and succeeds again once the
// ISR has shrunk.
func TestBehaviour18FinWithReplicasDown(t *testing.T) {
	c := newMemCluster(t, 200*time.Millisecond)
	normal, _, nbox := c.subscribe("normal", false)
	ordered, _, obox := c.subscribe("ordered", true)
	for i := 0; i < 4; i++ {
		if r := c.publish(fmt.Sprint(i)); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	// Ordered: one at a time, each FIN confirmed on n2 and n3.
	d := obox.next(t)
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	d = obox.next(t)

	c.cutLink("n3")
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	select {
	case err := <-obox.refused:
		if !strings.Contains(err.Error(), "acknowledged") {
			t.Fatalf("ordered FIN refused with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ordered FIN did not fail with an ISR member unreachable")
	}
	// A write notices n3 down and shrinks the ISR; then FINs succeed again.
	if r := c.publish("shrink"); r.Err != nil {
		t.Fatal(r.Err)
	}
	d = obox.next(t)
	c.system.Root.Send(ordered, &channel.Finished{ConsumerID: 1, ID: d.ID})
	obox.next(t)
	obox.none(t, 100*time.Millisecond)

	// Normal: FINs succeed with both followers unreachable.
	c.cutLink("n2")
	for i := 0; i < 4; i++ {
		d := nbox.next(t)
		c.system.Root.Send(normal, &channel.Finished{ConsumerID: 1, ID: d.ID})
	}
	nbox.none(t, 200*time.Millisecond)
	res, err := c.system.Root.RequestFuture(normal, &channel.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if st := res.(*channel.Snapshot).Stats; st.ConfirmedCount < 4 {
		t.Fatalf("normal channel confirmed %d of 4 with replicas down", st.ConfirmedCount)
	}
}

// After a failover, a follower that missed the old leader's last write is
// sent what it lacks by the new leader, and the next write commits on both.
func TestNewLeaderCatchesUpABehindFollower(t *testing.T) {
	c := newMemCluster(t, 5*time.Second)
	if r := c.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	// n3 stops receiving; n1's next write reaches only n2, and n1 dies
	// before it can shrink the ISR or commit.
	c.mu.Lock()
	c.hold["n3"] = true
	c.mu.Unlock()
	done := make(chan topic.Reply, 1)
	c.system.Root.Send(c.pids["n1"], &topic.Published{Bodies: [][]byte{[]byte("b")}, Reply: func(r topic.Reply) { done <- r }})
	waitFor(t, "n2 to commit the second write", func() bool {
		return c.stats("n2").Committed == 2
	})
	c.system.Root.PoisonFuture(c.pids["n1"]).Wait()
	if count := c.stats("n3").Committed; count != 1 {
		t.Fatalf("n3 has %d messages, want 1 (behind)", count)
	}

	role := topic.Role{Leader: "n2", ISR: []string{"n2", "n3"}, EpochForWrite: 2, Replicas: 3}
	c.mu.Lock()
	c.hold["n3"] = false
	c.mu.Unlock()
	c.system.Root.Send(c.pids["n3"], &topic.RoleChanged{Role: role})
	c.system.Root.Send(c.pids["n2"], &topic.RoleChanged{Role: role})
	if r := c.publishTo("n2", "c"); r.Err != nil {
		t.Fatalf("write at the new leader: %v", r.Err)
	}
	n2, n3 := c.stats("n2"), c.stats("n3")
	if n2.End != n3.End || n2.Committed != 3 || n3.Committed != 3 {
		t.Fatalf("after catch-up n2 at %d/%d, n3 at %d/%d", n2.End, n2.Committed, n3.End, n3.Committed)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A write sent while the stream to the only other ISR member is down is
// sent again once the stream reconnects, and commits on its ack: with one
// follower in sync there is no majority to shrink it out with, so before,
// the write waited for --write-timeout and failed, and the partition's
// writes were disabled until a new epoch.
func TestWriteMissedByAReconnectingFollowerIsSentAgain(t *testing.T) {
	c := newMemClusterFrom(t, 100*time.Millisecond, 1, storage.Options{}, nil, withWriteTimeout(time.Hour))
	c.cutLink("n3")
	if r := c.publish("shrinks n3 out"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.mu.Lock()
	isr := append([]string(nil), c.isr...)
	c.mu.Unlock()
	if !slices.Equal(isr, []string{"n1", "n2"}) {
		t.Fatalf("ISR %v, want [n1 n2]", isr)
	}

	dialled := func() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.links["n2"]) }
	before := dialled()
	c.cutLink("n2")
	done := make(chan topic.Reply, 1)
	c.system.Root.Send(c.pids["n1"], &topic.Published{Bodies: [][]byte{[]byte("sent while n2's stream is down")}, Reply: func(r topic.Reply) { done <- r }})
	// The write found the stream cut (the replica actor dialled again),
	// and only then does the link come back.
	waitFor(t, "n2's stream to be dialled again", func() bool { return dialled() > before })
	c.healLink("n2")
	select {
	case r := <-done:
		if r.Err != nil {
			t.Fatalf("write failed: %v", r.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the write is still waiting 10 s after n2's stream came back")
	}
	if r := c.publish("after"); r.Err != nil {
		t.Fatal(r.Err)
	}
	c.stopAndCompare(t, "n2")
}
