package broker

import (
	"context"
	"time"
)

// followChannels keeps this node's channels, and the cluster view's, in
// step with the cluster's: a channel created, paused, made ordered,
// limited or deleted on any node is so here.
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
		if !t.HasChannel(name) && !b.channelStillStored(ctx, t.Name, name) {
			continue
		}
		if _, err := t.channelPIDs(b.system, name); err != nil {
			b.log.Warn("opening a channel created elsewhere", "topic", t.Name, "channel", name, "err", err)
			continue
		}
		b.applyChannelMeta(t, ev.Channel)
	}
}

// channelStillStored reports whether a channel this node does not have is
// still in the cluster's metadata. The watch may deliver a change to a
// channel after this node deleted it (a pause made just before the
// deletion): opening it then would bring it back until the deletion is
// delivered too. A channel that cannot be checked is opened: created
// elsewhere, it must not be missed.
func (b *Broker) channelStillStored(ctx context.Context, topicName, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	chans, err := b.meta.Channels(ctx, topicName)
	if err != nil {
		return true
	}
	for _, c := range chans {
		if c.Name == name {
			return true
		}
	}
	return false
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
