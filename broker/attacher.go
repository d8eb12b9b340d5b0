package broker

import (
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
)

// partitionLed: this node started leading a partition, in the moves-th
// change of its leadership here (replicaSlot.moves), and subs want it.
type partitionLed struct {
	topic     *Topic
	partition int32
	pid       *actor.PID // the partition's actor
	moves     uint64
	subs      []*Subscription
}

// attacher brings subscriptions to the partitions this node starts
// leading: it asks the partition for each channel they consume, once per
// channel, and attaches them when the answer arrives, without waiting for
// it. An answer that comes after the leadership moved on, or after a
// subscription ended, attaches nothing (Subscription.attach).
type attacher struct{ b *Broker }

func (a *attacher) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*partitionLed)
	if !ok || m.pid == nil {
		// No actor to ask (the partition stopped meanwhile): the
		// leadership change that follows attaches or detaches it.
		return
	}
	byChannel := map[string][]*Subscription{}
	for _, s := range m.subs {
		byChannel[s.Channel] = append(byChannel[s.Channel], s)
	}
	for name, subs := range byChannel {
		f := ctx.RequestFuture(m.pid, &topic.ChannelWanted{Name: name}, a.b.cfg.ChannelWait)
		ctx.ReenterAfter(f, func(res any, err error) {
			if errors.Is(err, actor.ErrTimeout) {
				a.askAgain(ctx, m, subs)
				return
			}
			pid := a.b.readyChannel(m.topic, m.partition, name, res, err)
			if pid == nil {
				return
			}
			for _, s := range subs {
				if s.attach(ctx, m.partition, pid, m.moves) && !s.Consumer.Full() {
					ctx.Send(pid, &channel.WindowOpened{})
				}
			}
		})
	}
}

// askAgain asks a partition that did not answer in time once more, for the
// subscriptions that still wait for it: a partition busy for longer than
// channelWait (catching up thousands of others after a failover) must
// still reach its consumers, not leave them without its messages until
// they reconnect.
func (a *attacher) askAgain(ctx actor.Context, m *partitionLed, subs []*Subscription) {
	var still []*Subscription
	for _, s := range subs {
		if s.awaits(m.partition, m.moves) {
			still = append(still, s)
		}
	}
	if len(still) == 0 {
		return
	}
	a.b.log.Info("a partition this node leads has not opened a subscription's channel yet; asking again", "topic", m.topic.Name, "partition", m.partition)
	again := *m
	again.subs = still
	if again.pid = m.topic.Partition(int(m.partition)); again.pid == nil {
		return
	}
	ctx.Send(ctx.Self(), &again)
}
