package broker

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// soloBroker is a broker leading every partition of its topics itself (it
// has no Assignments), with real partition and channel actors, keeping
// its metadata in a fresh embedded etcd.
func soloBroker(tb testing.TB) *Broker { return soloBrokerWith(tb, nil) }

// soloBrokerWith is a soloBroker whose configuration tune changes first.
func soloBrokerWith(tb testing.TB, tune func(*Config)) *Broker {
	tb.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	cfg := Config{
		DataPath: tb.TempDir(),
		NodeID:   "n1",
		Writer:   topic.WriterConfig{Epoch: 1, Replicas: 1},
		Logger:   slog.New(slog.DiscardHandler),
	}
	if tune != nil {
		tune(&cfg)
	}
	b := New(cfg, system, cluster.NewMetaStore(embeddedEtcd(tb), ""))
	tb.Cleanup(b.Close)
	return b
}

// soloTopic is a soloBroker and its topic of one partition.
func soloTopic(t *testing.T) (*Broker, *Topic) {
	t.Helper()
	b := soloBroker(t)
	tp, err := b.CreateTopic(t.Context(), "follow", 1)
	if err != nil {
		t.Fatal(err)
	}
	return b, tp
}

// inbox is a consumer connection that keeps what it is delivered.
type inbox chan channel.Delivery

func (in inbox) Deliver(_ string, _ int32, ds []channel.Delivery) {
	for _, d := range ds {
		in <- d
	}
}
func (inbox) Refused(string, uint64, error) {}
func (inbox) ChannelGone()                  {}

// subscribed is a consumer with a window of 16, subscribed to channel c of
// tp, and what it is delivered.
func subscribed(t *testing.T, b *Broker, tp *Topic) (*Subscription, inbox) {
	t.Helper()
	in := make(inbox, 16)
	c := &channel.Consumer{ID: 1, MsgTimeout: time.Minute, Out: in}
	c.SetRDY(16)
	s, err := b.Subscribe(t.Context(), tp, "c", c, -1)
	if err != nil {
		t.Fatal(err)
	}
	return s, in
}

// moveLeadership is a role change of partition p as the assignment watch
// makes it: under roleMu. It fails the test if it waits for an answer.
func moveLeadership(t *testing.T, b *Broker, tp *Topic, p int32, leads bool) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.roleMu.Lock()
		defer b.roleMu.Unlock()
		if tp.slot(int(p)).lead(leads) {
			b.leadershipMoved(tp, p, leads)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("a role change (leads %v) waited for the partition's answer under roleMu", leads)
	}
}

// heldAsk is a ChannelWanted a slow partition has not answered.
type heldAsk struct {
	name   string
	sender *actor.PID
}

// slowPartition stands in for a partition's actor while a role change
// asks it for channels: it holds each ChannelWanted for the test, which
// relays the real partition's answer when it chooses (answer).
type slowPartition struct {
	b    *Broker
	real *actor.PID
	held chan heldAsk
}

func (s *slowPartition) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*topic.ChannelWanted); ok {
		s.held <- heldAsk{name: m.Name, sender: ctx.Sender()}
	}
}

// lead moves partition p's leadership to this node with the slow
// partition in front of its actor, and returns the ask it holds.
func (s *slowPartition) lead(t *testing.T, tp *Topic, p int32) heldAsk {
	t.Helper()
	slot := tp.slot(int(p))
	gate := s.b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return s }))
	defer s.b.system.Root.Stop(gate)
	slot.pid.Store(gate)
	moveLeadership(t, s.b, tp, p, true)
	slot.pid.Store(s.real)
	return s.take(t)
}

// take waits for the next ask the slow partition holds.
func (s *slowPartition) take(t *testing.T) heldAsk {
	t.Helper()
	select {
	case ask := <-s.held:
		return ask
	case <-time.After(5 * time.Second):
		t.Fatal("the partition was never asked for the subscription's channel")
		return heldAsk{}
	}
}

// answer relays the real partition's answer to a held ask, and returns
// once the attacher has acted on it.
func (s *slowPartition) answer(t *testing.T, ask heldAsk) {
	t.Helper()
	res, err := s.b.system.Root.RequestFuture(s.real, &topic.ChannelWanted{Name: ask.name}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The answer completes the attacher's future here, which queues its
	// continuation as a system message: the attacher runs it before it
	// takes the barrier.
	s.b.system.Root.Send(ask.sender, res)
	if err := s.b.system.Root.RequestFuture(s.b.attacher, &barrier{}, 5*time.Second).Wait(); err != nil {
		t.Fatal(err)
	}
}

// barrier is answered by any actor once it has taken every message sent
// to it before.
type barrier struct{}

func (*barrier) GetAutoResponse(actor.Context) any { return &barrier{} }

// consumersOf lists the consumers channel c of partition p delivers to.
func consumersOf(t *testing.T, b *Broker, tp *Topic, p int32) []int64 {
	t.Helper()
	pids, err := tp.channelPIDs(b.system, "c")
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.system.Root.RequestFuture(pids[p], &channel.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	return res.(*channel.Snapshot).Consumers
}

// received waits for the consumer's next delivery.
func received(t *testing.T, in inbox) channel.Delivery {
	t.Helper()
	select {
	case d := <-in:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("the consumer received nothing")
		return channel.Delivery{}
	}
}

// A role change that makes this node a leader returns before the
// partition answers for the subscriptions' channels, releasing roleMu, and
// the subscription attaches when the answer comes, delivering what was
// published meanwhile.
func TestLeadershipMovedDoesNotWaitForThePartition(t *testing.T) {
	b, tp := soloTopic(t)
	s, in := subscribed(t, b, tp)
	moveLeadership(t, b, tp, 0, false)
	if s.PID(0) != nil {
		t.Fatal("a partition this node stopped leading is still attached")
	}
	slow := &slowPartition{b: b, real: tp.Partition(0), held: make(chan heldAsk, 4)}
	ask := slow.lead(t, tp, 0)
	if !b.roleMu.TryLock() {
		t.Fatal("roleMu is held while the partition has not answered")
	}
	b.roleMu.Unlock()
	if s.PID(0) != nil {
		t.Fatal("the subscription attached before the partition answered")
	}
	answeredLate(t, b, tp, s, in, slow, ask)
}

// answeredLate publishes to partition 0 while the slow partition holds the
// subscription's ask, then answers it: the subscription must attach and
// deliver what was published meanwhile.
func answeredLate(t *testing.T, b *Broker, tp *Topic, s *Subscription, in inbox, slow *slowPartition, ask heldAsk) {
	t.Helper()
	if r := b.PublishWait(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{}); r.Err != nil {
		t.Fatal(r.Err)
	}
	slow.answer(t, ask)
	if s.PID(0) == nil {
		t.Fatal("the partition's answer did not attach the subscription")
	}
	if d := received(t, in); string(d.Body) != "m" {
		t.Fatalf("received %q, want m", d.Body)
	}
}

// An answer that arrives after the leadership it was asked under ended,
// or after the subscription ended, attaches nothing; the subscription
// ends as the last leadership change left it, joined to the channel once.
func TestLateChannelAnswerAttachesOnlyUnderItsLeadership(t *testing.T) {
	b, tp := soloTopic(t)
	s, in := subscribed(t, b, tp)
	slow := &slowPartition{b: b, real: tp.Partition(0), held: make(chan heldAsk, 4)}
	moveLeadership(t, b, tp, 0, false)

	t.Run("led then not", func(t *testing.T) {
		ask := slow.lead(t, tp, 0)
		moveLeadership(t, b, tp, 0, false)
		slow.answer(t, ask)
		if s.PID(0) != nil || len(s.Consumer.Channels()) != 0 {
			t.Fatal("an answer from an ended leadership attached the subscription")
		}
		if ids := consumersOf(t, b, tp, 0); len(ids) != 0 {
			t.Fatalf("the channel delivers to %v under a leadership that ended", ids)
		}
	})
	t.Run("led, not, led again", func(t *testing.T) {
		first := slow.lead(t, tp, 0)
		moveLeadership(t, b, tp, 0, false)
		second := slow.lead(t, tp, 0)
		slow.answer(t, second)
		if s.PID(0) == nil {
			t.Fatal("the answer under the current leadership did not attach the subscription")
		}
		slow.answer(t, first)
		if r := b.PublishWait(tp, 0, [][]byte{[]byte("m")}, 0, Forwarded{}); r.Err != nil {
			t.Fatal(r.Err)
		}
		if ids := consumersOf(t, b, tp, 0); len(ids) != 1 || ids[0] != s.Consumer.ID {
			t.Fatalf("the channel delivers to %v, want the consumer once", ids)
		}
		if d := received(t, in); string(d.Body) != "m" {
			t.Fatalf("received %q, want m", d.Body)
		}
	})
	t.Run("led then unsubscribed", func(t *testing.T) {
		moveLeadership(t, b, tp, 0, false)
		ask := slow.lead(t, tp, 0)
		b.Unsubscribe(t.Context(), s)
		slow.answer(t, ask)
		if s.PID(0) != nil {
			t.Fatal("an answer attached a subscription that had ended")
		}
		if ids := consumersOf(t, b, tp, 0); len(ids) != 0 {
			t.Fatalf("the channel delivers to %v after its subscription ended", ids)
		}
	})
}

// gated puts a slow partition in front of partition p's actor until the
// test calls the returned function, which puts the real one back.
func gated(t *testing.T, b *Broker, tp *Topic, p int32) (*slowPartition, func()) {
	t.Helper()
	slot := tp.slot(int(p))
	slow := &slowPartition{b: b, real: slot.pid.Load(), held: make(chan heldAsk, 4)}
	gate := b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return slow }))
	slot.pid.Store(gate)
	return slow, func() {
		slot.pid.Store(slow.real)
		b.system.Root.Stop(gate)
	}
}

// A SUB does not fail, nor wait for long, when a partition here is slow to
// open its channel: it answers, and the partition is attached once it
// opens the channel.
func TestSubscribeDoesNotWaitForASlowPartition(t *testing.T) {
	b := soloBrokerWith(t, func(c *Config) { c.SubOpenWait = 50 * time.Millisecond })
	tp, err := b.CreateTopic(t.Context(), "slowsub", 1)
	if err != nil {
		t.Fatal(err)
	}
	slow, ungate := gated(t, b, tp, 0)
	s, in := subscribed(t, b, tp)
	slow.take(t) // the SUB's own ask, given up on
	if s.PID(0) != nil {
		t.Fatal("attached to a partition that never answered")
	}
	ask := slow.take(t) // the attacher's
	ungate()
	answeredLate(t, b, tp, s, in, slow, ask)
}

// A partition this node starts leading that does not open a
// subscription's channel within ChannelWait is asked again, and attached
// when it answers: the consumer is not left without its messages.
func TestAttacherAsksASlowPartitionAgain(t *testing.T) {
	b := soloBrokerWith(t, func(c *Config) { c.ChannelWait = 50 * time.Millisecond })
	tp, err := b.CreateTopic(t.Context(), "slowlead", 1)
	if err != nil {
		t.Fatal(err)
	}
	s, in := subscribed(t, b, tp)
	moveLeadership(t, b, tp, 0, false)
	slow, ungate := gated(t, b, tp, 0)
	moveLeadership(t, b, tp, 0, true)
	slow.take(t) // never answered: the attacher gives up on it
	ask := slow.take(t)
	ungate()
	answeredLate(t, b, tp, s, in, slow, ask)
}

// droppingPartition stands in for a partition whose channel is dropped
// while a subscription asks for it (the last consumer of an ephemeral
// channel leaving a moment before): the first ask is answered as the
// partition answers one it held while the channel was deleted again, with
// no channel; the others go to the real partition.
type droppingPartition struct {
	b     *Broker
	tp    *Topic
	real  *actor.PID
	asked int
}

func (d *droppingPartition) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*topic.ChannelWanted)
	if !ok {
		return
	}
	if d.asked++; d.asked == 1 {
		d.b.dropChannel(d.tp, m.Name)
		ctx.Respond(&topic.ChannelReady{})
		return
	}
	res, err := ctx.RequestFuture(d.real, m, 5*time.Second).Result()
	if err == nil {
		ctx.Respond(res)
	}
}

// A subscription whose channel is dropped while it opens it, and whose
// partition so answers with no channel, opens the channel again, as one
// handed a dropped channel's actors does, rather than fail the SUB.
func TestSubscribeOpensAChannelDroppedMeanwhileAgain(t *testing.T) {
	b, tp := soloTopic(t)
	slot := tp.slot(0)
	real := slot.pid.Load()
	gate := b.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &droppingPartition{b: b, tp: tp, real: real} }))
	defer b.system.Root.Stop(gate)
	slot.pid.Store(gate)
	defer slot.pid.Store(real)
	in := make(inbox, 1)
	c := &channel.Consumer{ID: 1, MsgTimeout: time.Minute, Out: in}
	if _, err := b.Subscribe(t.Context(), tp, "c#ephemeral", c, -1); err != nil {
		t.Fatalf("subscribing while the channel was dropped: %v", err)
	}
}
