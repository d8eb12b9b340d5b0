package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
)

// Subscription is one consumer connection's hold on a channel: the channel
// actors of the partitions this node leads. It gains and loses partitions
// as leadership moves, so a connection made before a failover starts
// delivering when its node becomes a leader.
type Subscription struct {
	Consumer *channel.Consumer
	Channel  string
	Only     int32 // a single partition (SUB T C P), or -1 for all

	topic *Topic
	// mu orders what the channel actors are told: a partition's Subscribed
	// is sent with it held, as are the Unsubscribed of detach and end, so
	// none arrives after the message that undoes it.
	mu     sync.Mutex
	byPart map[int32]*actor.PID
	ended  bool // unsubscribed: it gains no partition any more
}

// PID is the channel actor delivering partition p to this consumer, or nil.
func (s *Subscription) PID(p int32) *actor.PID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPart[p]
}

func (s *Subscription) wants(p int32) bool { return s.Only < 0 || s.Only == p }

// attach has pid, partition p's channel actor, deliver to the consumer if
// the subscription still wants it: it has not ended, and p's leadership
// here has not moved since its moves-th change (Topic.leadership), when
// the channel was asked for. It reports whether the consumer was added: a
// partition is added once, however many ways it is found.
func (s *Subscription) attach(to actor.SenderContext, p int32, pid *actor.PID, moves uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, now := s.topic.leadership(p); s.ended || s.byPart[p] != nil || now != moves {
		return false
	}
	s.byPart[p] = pid
	s.channelsChanged()
	to.Send(pid, &channel.Subscribed{Consumer: s.Consumer})
	return true
}

// awaits reports whether the subscription still waits for partition p as
// of its leadership's moves-th change here.
func (s *Subscription) awaits(p int32, moves uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, now := s.topic.leadership(p)
	return !s.ended && s.byPart[p] == nil && now == moves
}

// detach removes partition p, which this node stopped leading.
func (s *Subscription) detach(to actor.SenderContext, p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pid := s.byPart[p]
	if pid == nil {
		return
	}
	delete(s.byPart, p)
	s.channelsChanged()
	to.Send(pid, &channel.Unsubscribed{ConsumerID: s.Consumer.ID})
}

// end leaves every channel actor; a channel whose answer arrives later is
// not attached.
func (s *Subscription) end(to actor.SenderContext) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	for _, pid := range s.byPart {
		to.Send(pid, &channel.Unsubscribed{ConsumerID: s.Consumer.ID})
	}
}

// channelsChanged tells the consumer which channel actors it now takes
// messages from; the caller holds mu.
func (s *Subscription) channelsChanged() {
	pids := make([]*actor.PID, 0, len(s.byPart))
	for _, pid := range s.byPart {
		pids = append(pids, pid)
	}
	s.Consumer.SetChannels(pids)
}

// Subscribe attaches a consumer to a channel, creating it as nsqd's SUB
// does (unless the topic disables that), on every partition this node
// leads (or only partition only).
//
// A channel dropped while the subscription opened it (an ephemeral
// channel's last consumer leaving, a deletion) may have handed over actors
// on their way out; the subscription then opens the channel again, as
// nsqd's SUB retries a channel found exiting.
func (b *Broker) Subscribe(ctx context.Context, t *Topic, name string, c *channel.Consumer, only int32) (*Subscription, error) {
	for attempt := 1; ; attempt++ {
		s, err := b.subscribe(ctx, t, name, c, only)
		if !errors.Is(err, errChannelDropped) {
			return s, err
		}
		if attempt == maxSubscribeAttempts {
			return nil, fmt.Errorf("channel %s:%s was deleted %d times while subscribing", t.Name, name, attempt)
		}
	}
}

// errChannelDropped: the channel was dropped while subscribe opened it.
var errChannelDropped = errors.New("channel dropped while subscribing")

// maxSubscribeAttempts bounds Subscribe's retries: a channel dropped again
// and again under a subscription is being deleted on purpose.
const maxSubscribeAttempts = 3

func (b *Broker) subscribe(ctx context.Context, t *Topic, name string, c *channel.Consumer, only int32) (*Subscription, error) {
	t.mu.RLock()
	drops := t.drops[name]
	t.mu.RUnlock()
	pids, err := b.openForSub(ctx, t, name)
	if err != nil {
		if t.isClosing() {
			return nil, ErrTopicGone // its partitions may be stopping
		}
		t.mu.RLock()
		dropped := t.drops[name] != drops
		t.mu.RUnlock()
		if dropped {
			// A partition holding the ask while the channel was dropped
			// answers with none.
			return nil, errChannelDropped
		}
		return nil, err
	}
	s := &Subscription{Consumer: c, Channel: name, Only: only, topic: t, byPart: map[int32]*actor.PID{}}
	t.mu.Lock()
	if t.closing {
		t.mu.Unlock()
		return nil, ErrTopicGone
	}
	if t.drops[name] != drops {
		t.mu.Unlock()
		return nil, errChannelDropped
	}
	if limit := b.cfg.MaxChannelConsumers; limit > 0 && t.consumers[name] >= limit {
		t.mu.Unlock()
		return nil, fmt.Errorf("channel %s:%s already has the maximum of %d consumers", t.Name, name, limit)
	}
	if t.consumers == nil {
		t.consumers = make(map[string]int)
		t.subs = make(map[*Subscription]bool)
	}
	t.consumers[name]++
	t.subs[s] = true
	t.mu.Unlock()
	// Only a partition's leader delivers; followers keep their channels for
	// offsets. The partitions are read after the subscription is
	// registered, so one this node starts leading meanwhile, or an expand
	// adds, is found here or by leadershipMoved.
	for p := range int32(t.NumPartitions()) {
		leads, moves := t.leadership(p)
		if !leads || !s.wants(p) {
			continue
		}
		if int(p) < len(pids) && pids[p] != nil {
			s.attach(b.system.Root, p, pids[p], moves)
			continue
		}
		// Not answered in time, or led since: attached when it answers.
		b.system.Root.Send(b.attacher, &partitionLed{topic: t, partition: p, pid: t.Partition(int(p)), moves: moves, subs: []*Subscription{s}})
	}
	return s, nil
}

// openForSub opens the channel a SUB names on every partition here. The
// actors of partitions that did not answer within SubOpenWait are nil: the
// SUB does not fail for one partition slow to answer (its mailbox full
// after a failover, say), and the consumer takes the others' messages
// while the attacher waits for it.
func (b *Broker) openForSub(ctx context.Context, t *Topic, name string) ([]*actor.PID, error) {
	var set *uint16
	if !t.HasChannel(name) {
		var err error
		if set, err = b.registerChannel(ctx, t, name); err != nil {
			return nil, err
		}
	}
	pids, err := t.openChannel(b.system, name, b.cfg.SubOpenWait)
	if err != nil && !errors.Is(err, actor.ErrTimeout) {
		return nil, err
	}
	if set != nil {
		// To the partitions that answered: one slow to open the channel
		// hears of it from the metadata's watch, not from another ask.
		for _, pid := range pids {
			if pid != nil {
				b.system.Root.Send(pid, &channel.MaxAttemptsChanged{MaxAttempts: *set})
			}
		}
	}
	return pids, nil
}

// ChannelForSub creates the channel a SUB names if it does not exist, as
// nsqd does; a topic that disables that refuses with
// ErrChannelNotRegistered unless /channel/create made it somewhere.
func (b *Broker) ChannelForSub(ctx context.Context, t *Topic, name string) error {
	if t.HasChannel(name) {
		return nil
	}
	set, err := b.registerChannel(ctx, t, name)
	if err != nil {
		return err
	}
	if _, err := t.channelPIDs(b.system, name); err != nil {
		return err
	}
	b.maxAttemptsSet(t, name, set)
	return nil
}

// registerChannel puts a channel a SUB names into the cluster's metadata,
// as ChannelForSub does, without opening it here; it returns the
// max_attempts it stored for a new channel (storeChannel).
func (b *Broker) registerChannel(ctx context.Context, t *Topic, name string) (*uint16, error) {
	if t.Settings().DisableChannelAutoCreate {
		if err := b.channelRegistered(ctx, t, name); err != nil {
			return nil, err
		}
	}
	if topic.IsEphemeral(name) || t.Ephemeral {
		return nil, nil // an ephemeral channel lives only here
	}
	return b.storeChannel(ctx, t.Name, name, ChannelSpec{})
}

// Unsubscribe ends a subscription. As in nsqd, an ephemeral channel goes
// with its last consumer, and an ephemeral topic with its last channel.
func (b *Broker) Unsubscribe(ctx context.Context, s *Subscription) {
	t, name := s.topic, s.Channel
	t.mu.Lock()
	delete(t.subs, s)
	t.consumers[name]--
	last := t.consumers[name] <= 0
	if last {
		delete(t.consumers, name)
	}
	t.mu.Unlock()
	s.end(b.system.Root)
	if !last || !topic.IsEphemeral(name) {
		return
	}
	// Dropped only if no consumer came meanwhile, under the lock a new
	// subscription counts itself under: one either keeps the channel or
	// sees it dropped and opens it anew.
	t.mu.Lock()
	gone := t.consumers[name] == 0 && t.channels[name]
	if gone {
		b.dropChannelLocked(t, name)
	}
	// An ephemeral topic goes with its last channel, whether this leave
	// or a deletion took it, decided under the same lock: a subscription
	// counted in before keeps it, one after sees it closing and
	// subscribes to the topic made anew.
	closing := t.Ephemeral && !t.closing && len(t.channels) == 0 && len(t.consumers) == 0
	if closing {
		t.closing = true
	}
	t.mu.Unlock()
	// This incarnation, not whatever the name leads to now: a topic made
	// anew under the name has subscribers of its own.
	if closing && t.setDeleted(true) {
		if err := b.dropTopic(t); err != nil {
			b.log.Warn("removing ephemeral topic", "topic", t.Name, "err", err)
		}
	}
}

// leadershipMoved updates the subscriptions of a topic when this node
// starts or stops leading partition p; the caller holds roleMu. One that
// stops detaches at once. One that starts asks the partition for the
// subscriptions' channels through the attacher, which attaches them when
// the partition answers: a partition actor slow to answer, or thousands
// of partitions moving at once, must not hold back the node's other role
// changes.
func (b *Broker) leadershipMoved(t *Topic, p int32, leads bool) {
	subs := t.subscriptionsTo(p)
	if !leads {
		for _, s := range subs {
			s.detach(b.system.Root, p)
		}
		return
	}
	if len(subs) == 0 {
		return
	}
	_, moves := t.leadership(p)
	b.system.Root.Send(b.attacher, &partitionLed{topic: t, partition: p, pid: t.Partition(int(p)), moves: moves, subs: subs})
}

// subscriptionsTo lists the subscriptions that want partition p.
func (t *Topic) subscriptionsTo(p int32) []*Subscription {
	t.mu.RLock()
	defer t.mu.RUnlock()
	subs := make([]*Subscription, 0, len(t.subs))
	for s := range t.subs {
		if s.wants(p) {
			subs = append(subs, s)
		}
	}
	return subs
}

// Consumers is how many connections this node has subscribed to a channel.
func (t *Topic) Consumers(name string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.consumers[name]
}

// channelWait bounds how long a partition may take to open a channel; a
// subscription that follows a partition asks again after it (attacher).
const channelWait = 10 * time.Second

// readyChannel is the channel actor a partition's answer to ChannelWanted
// names, or nil. A subscription that does not get the channel never
// delivers that partition's messages here, so the failure is logged: it is
// the first suspect when a consumer stops receiving a partition after its
// leadership moved.
func (b *Broker) readyChannel(t *Topic, p int32, name string, res any, err error) *actor.PID {
	if err == nil {
		if ready, ok := res.(*topic.ChannelReady); ok && ready.PID != nil {
			return ready.PID
		}
		err = errors.New("the partition has no such channel")
	}
	b.log.Warn("a subscription could not follow a partition this node now leads", "topic", t.Name, "partition", p, "channel", name, "err", err)
	return nil
}
