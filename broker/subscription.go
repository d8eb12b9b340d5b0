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

	topic  *Topic
	mu     sync.Mutex
	byPart map[int32]*actor.PID
}

// PID is the channel actor delivering partition p to this consumer, or nil.
func (s *Subscription) PID(p int32) *actor.PID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byPart[p]
}

func (s *Subscription) wants(p int32) bool { return s.Only < 0 || s.Only == p }

// set adds (pid) or removes (nil) partition p and tells the consumer which
// channel actors it now takes messages from. It reports whether anything
// changed: a partition is added once, however many ways it is found.
func (s *Subscription) set(p int32, pid *actor.PID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (s.byPart[p] != nil) == (pid != nil) {
		return false
	}
	if pid == nil {
		delete(s.byPart, p)
	} else {
		s.byPart[p] = pid
	}
	pids := make([]*actor.PID, 0, len(s.byPart))
	for _, pid := range s.byPart {
		pids = append(pids, pid)
	}
	s.Consumer.SetChannels(pids)
	return true
}

// Subscribe attaches a consumer to a channel, creating it as nsqd's SUB
// does (unless the topic disables that), on every partition this node
// leads (or only partition only).
func (b *Broker) Subscribe(ctx context.Context, t *Topic, name string, c *channel.Consumer, only int32) (*Subscription, error) {
	if err := b.ChannelForSub(ctx, t, name); err != nil {
		return nil, err
	}
	pids, err := t.channelPIDs(b.system, name)
	if err != nil {
		return nil, err
	}
	s := &Subscription{Consumer: c, Channel: name, Only: only, topic: t, byPart: map[int32]*actor.PID{}}
	t.mu.Lock()
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
	for p := range t.NumPartitions() {
		if !t.Leads(p) || !s.wants(int32(p)) {
			continue
		}
		var pid *actor.PID
		if p < len(pids) {
			pid = pids[p]
		}
		if pid == nil {
			pid = b.wantedChannel(t, int32(p), name)
		}
		if pid != nil && s.set(int32(p), pid) {
			b.system.Root.Send(pid, &channel.Subscribed{Consumer: c})
		}
	}
	return s, nil
}

// ChannelForSub creates the channel a SUB names if it does not exist, as
// nsqd does; a topic that disables that refuses with
// ErrChannelNotRegistered unless /channel/create made it somewhere.
func (b *Broker) ChannelForSub(ctx context.Context, t *Topic, name string) error {
	if t.HasChannel(name) {
		return nil
	}
	if t.Settings().DisableChannelAutoCreate {
		if err := b.channelRegistered(ctx, t, name); err != nil {
			return err
		}
	}
	return b.CreateChannel(ctx, t, name)
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
	for _, pid := range s.Consumer.Channels() {
		b.system.Root.Send(pid, &channel.Unsubscribed{ConsumerID: s.Consumer.ID})
	}
	if !last || !topic.IsEphemeral(name) {
		return
	}
	if err := b.DeleteChannel(ctx, t, name); err != nil && !errors.Is(err, ErrChannelNotFound) {
		b.log.Warn("removing ephemeral channel", "topic", t.Name, "channel", name, "err", err)
	}
	if t.Ephemeral && len(t.ChannelNames()) == 0 {
		if err := b.DeleteTopic(ctx, t.Name); err != nil && !errors.Is(err, ErrTopicNotFound) {
			b.log.Warn("removing ephemeral topic", "topic", t.Name, "err", err)
		}
	}
}

// leadershipMoved updates the subscriptions of a topic when this node
// starts or stops leading partition p.
func (b *Broker) leadershipMoved(t *Topic, p int32, leads bool) {
	t.mu.RLock()
	subs := make([]*Subscription, 0, len(t.subs))
	for s := range t.subs {
		if s.wants(p) {
			subs = append(subs, s)
		}
	}
	t.mu.RUnlock()
	for _, s := range subs {
		if !leads {
			if pid := s.PID(p); pid != nil && s.set(p, nil) {
				b.system.Root.Send(pid, &channel.Unsubscribed{ConsumerID: s.Consumer.ID})
			}
			continue
		}
		pid := b.wantedChannel(t, p, s.Channel)
		if pid == nil || !s.set(p, pid) {
			continue
		}
		b.system.Root.Send(pid, &channel.Subscribed{Consumer: s.Consumer})
		if !s.Consumer.Full() {
			b.system.Root.Send(pid, &channel.WindowOpened{})
		}
	}
}

// Consumers is how many connections this node has subscribed to a channel.
func (t *Topic) Consumers(name string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.consumers[name]
}

// wantedChannel opens a channel on a partition this node now leads, for a
// subscription to follow it there. A subscription that does not get the
// channel never delivers that partition's messages here, so the failure is
// logged: it is the first suspect when a consumer stops receiving a
// partition after its leadership moved.
func (b *Broker) wantedChannel(t *Topic, p int32, name string) *actor.PID {
	res, err := b.system.Root.RequestFuture(t.Partition(int(p)), &topic.ChannelWanted{Name: name}, 10*time.Second).Result()
	if err == nil {
		if pid := res.(*topic.ChannelReady).PID; pid != nil {
			return pid
		}
		err = errors.New("the partition has no such channel")
	}
	b.log.Warn("a subscription could not follow a partition this node now leads", "topic", t.Name, "partition", p, "channel", name, "err", err)
	return nil
}
