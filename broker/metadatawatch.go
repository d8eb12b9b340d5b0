package broker

import (
	"context"

	"github.com/partitamq/partita/actors/channel"
)

// followChannels keeps this node's channels, and the cluster view's, in
// step with the cluster's: a channel created, paused, made ordered or
// deleted on any node is so here.
func (b *Broker) followChannels(ctx context.Context) {
	for ev := range b.meta.WatchChannels(ctx) {
		b.setChannel(ev)
		t := b.Topic(ev.Channel.Topic)
		if t == nil {
			continue
		}
		name := ev.Channel.Name
		if ev.Deleted {
			if t.HasChannel(name) {
				b.dropChannel(t, name)
			}
			continue
		}
		if _, err := t.channelPIDs(b.system, name); err != nil {
			b.log.Warn("opening a channel created elsewhere", "topic", t.Name, "channel", name, "err", err)
			continue
		}
		t.sendAll(b.system, name, &channel.PauseChanged{Paused: ev.Channel.Paused})
		t.sendAll(b.system, name, &channel.OrderChanged{Ordered: ev.Channel.Ordered})
	}
}

// followTopics keeps the topics in the cluster view, hands a topic's
// changed settings to its partitions here, and drops a topic deleted
// through any node, exactly the incarnation that was deleted.
func (b *Broker) followTopics(ctx context.Context) {
	for ev := range b.meta.WatchTopics(ctx) {
		b.setTopic(ev)
		m := ev.Topic
		t := b.Topic(m.Name)
		if t == nil || t.created != m.CreatedUnixNano {
			continue
		}
		if !ev.Deleted {
			if m.Ext {
				// An upgrade to ext made through any node applies here.
				t.ext.Store(true)
			}
			b.applySettings(t, settingsOf(m))
			if int(m.Partitions) > t.NumPartitions() {
				b.topicGrew(ctx, t, m)
			}
			continue
		}
		if err := b.dropTopic(t); err != nil {
			b.log.Warn("removing a deleted topic's files", "topic", m.Name, "err", err)
		}
	}
}
