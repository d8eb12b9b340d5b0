package broker

import (
	"context"
	"errors"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// openChannels opens a newly started topic's channels as the metadata has
// them. Whichever way a topic is opened (at start, when a partition is
// placed here, on a publish), it comes with every channel created before:
// a channel created while the topic was not open here reached this node
// only as an event it could not apply. Its partitions opened them as they
// started (topic.Options.Channels); this registers them and applies their
// pause and order.
func (b *Broker) openChannels(t *Topic, chans []cluster.ChannelMeta) error {
	for _, c := range chans {
		if _, err := t.channelPIDs(b.system, c.Name); err != nil {
			return err
		}
		// The metadata decides, either way: a channel's state file keeps
		// the pause it was last saved with, which a change acknowledged just
		// before a shutdown may not have reached.
		t.sendAll(b.system, c.Name, &channel.PauseChanged{Paused: c.Paused})
		if c.Ordered {
			t.sendAll(b.system, c.Name, &channel.OrderChanged{Ordered: true})
		}
		if c.Skipped {
			t.sendAll(b.system, c.Name, &channel.SkipChanged{Skipped: true})
		}
		for _, m := range limitsOf(c) {
			t.sendAll(b.system, c.Name, m)
		}
	}
	return nil
}

// limitsOf are what set a channel's limits as its metadata has them. Each
// is sent whenever the metadata is applied: a limit the channel has
// already changes nothing.
// applyChannelMeta tells the channel's actors here its flags and limits
// as stored at meta.Revision, unless they were told a later revision
// already. The watch brings every change in order, but it may lag behind
// a change this node made and told its actors itself; an older state it
// brings late must not undo that one (a channel made ordered, then
// delivering out of order again for a moment when its creation's event
// arrives). Metadata without a revision is told as it is.
func (b *Broker) applyChannelMeta(t *Topic, meta cluster.ChannelMeta) {
	t.flagsMu.Lock()
	defer t.flagsMu.Unlock()
	if meta.Revision != 0 {
		if meta.Revision <= t.flagRev[meta.Name] {
			return
		}
		if t.flagRev == nil {
			t.flagRev = make(map[string]int64)
		}
		t.flagRev[meta.Name] = meta.Revision
	}
	t.sendAll(b.system, meta.Name, &channel.PauseChanged{Paused: meta.Paused})
	t.sendAll(b.system, meta.Name, &channel.OrderChanged{Ordered: meta.Ordered})
	t.sendAll(b.system, meta.Name, &channel.SkipChanged{Skipped: meta.Skipped})
	for _, m := range limitsOf(meta) {
		t.sendAll(b.system, meta.Name, m)
	}
}

// channelChanged tells the channel's actors here what a change this node
// just stored made of it: the whole metadata as stored now, read back with
// its revision, or, when it cannot be read, the change alone.
func (b *Broker) channelChanged(ctx context.Context, t *Topic, name string, changed any) {
	meta, found, err := b.meta.Channel(ctx, t.Name, name)
	if err != nil || !found {
		t.flagsMu.Lock()
		t.sendAll(b.system, name, changed)
		t.flagsMu.Unlock()
		return
	}
	b.applyChannelMeta(t, meta)
}

func limitsOf(c cluster.ChannelMeta) []any {
	return []any{&channel.RateLimitChanged{KB: c.RateLimitKB}, clientLimitsChanged(c.ClientLimits),
		&channel.MaxAttemptsChanged{MaxAttempts: c.MaxAttempts}}
}

func clientLimitsChanged(ls []cluster.ClientLimit) *channel.ClientLimitsChanged {
	m := &channel.ClientLimitsChanged{}
	for _, l := range ls {
		m.Limits = append(m.Limits, channel.ClientLimit{Prefix: l.Prefix, Ready: l.Ready})
	}
	return m
}

// ChannelSpec is what a channel's creation may set. A nil MaxAttempts
// takes the node's --max-attempts for a new channel and leaves an
// existing one's as it is.
type ChannelSpec struct {
	MaxAttempts *uint16
}

// CreateChannel makes a channel on every partition of an existing topic.
func (b *Broker) CreateChannel(ctx context.Context, t *Topic, name string) error {
	return b.CreateChannelWith(ctx, t, name, ChannelSpec{})
}

// CreateChannelWith is CreateChannel with the channel's settings.
func (b *Broker) CreateChannelWith(ctx context.Context, t *Topic, name string, spec ChannelSpec) error {
	var set *uint16
	if !topic.IsEphemeral(name) && !t.Ephemeral {
		// An ephemeral channel lives only here, without metadata.
		var err error
		if set, err = b.storeChannel(ctx, t.Name, name, spec); err != nil {
			return err
		}
	}
	if _, err := t.channelPIDs(b.system, name); err != nil {
		return err
	}
	b.maxAttemptsSet(t, name, set)
	return nil
}

// maxAttemptsSet tells a channel's actors here the max_attempts just
// stored (set nil: nothing to tell), before the metadata's watch brings
// it back.
func (b *Broker) maxAttemptsSet(t *Topic, name string, set *uint16) {
	if set != nil {
		t.sendAll(b.system, name, &channel.MaxAttemptsChanged{MaxAttempts: *set})
	}
}

// storeChannel puts a durable channel into the cluster's metadata, new
// with spec's settings or the node's defaults, or, existing, with spec's
// settings applied. It returns the max_attempts it stored, nil when it
// left the channel's as it was or made a new one with none, which is what
// a channel's actors start with.
func (b *Broker) storeChannel(ctx context.Context, topicName, name string, spec ChannelSpec) (*uint16, error) {
	maxAttempts := b.cfg.MaxAttempts
	if spec.MaxAttempts != nil {
		maxAttempts = *spec.MaxAttempts
	}
	created, err := b.meta.CreateChannelWith(ctx, cluster.ChannelMeta{Topic: topicName, Name: name, MaxAttempts: maxAttempts})
	switch {
	case errors.Is(err, cluster.ErrTopicNotFound):
		return nil, ErrTopicNotFound
	case err != nil:
		return nil, err
	}
	b.channelStored(topicName, name, false)
	if created {
		if maxAttempts == 0 {
			return nil, nil
		}
		return &maxAttempts, nil
	}
	if spec.MaxAttempts == nil {
		return nil, nil
	}
	if err := b.meta.SetChannelMaxAttempts(ctx, topicName, name, maxAttempts); err != nil {
		return nil, err
	}
	return &maxAttempts, nil
}

// UpdateChannel changes a channel's settings cluster-wide (/channel/update),
// also from a node that has not opened its topic: the nodes that have hear
// of it from the metadata, this one's partitions at once. An ephemeral
// channel, which the metadata does not hold, is changed on this node.
func (b *Broker) UpdateChannel(ctx context.Context, topicName, name string, spec ChannelSpec) error {
	if spec.MaxAttempts == nil {
		return nil
	}
	t := b.Topic(topicName)
	if topic.IsEphemeral(name) || topic.IsEphemeral(topicName) {
		if t == nil || !t.HasChannel(name) {
			return ErrChannelNotFound
		}
	} else {
		err := b.meta.SetChannelMaxAttempts(ctx, topicName, name, *spec.MaxAttempts)
		if errors.Is(err, cluster.ErrChannelNotFound) {
			return ErrChannelNotFound
		}
		if err != nil {
			return err
		}
	}
	if t == nil || !t.HasChannel(name) {
		return nil
	}
	changed := &channel.MaxAttemptsChanged{MaxAttempts: *spec.MaxAttempts}
	if topic.IsEphemeral(name) || topic.IsEphemeral(topicName) {
		t.sendAll(b.system, name, changed)
		return nil
	}
	b.channelChanged(ctx, t, name, changed)
	return nil
}

// channelStored puts a channel this node just stored in etcd into its view
// at once, so its own /lookup lists it right after the create answered,
// as nsqlookupd does, instead of when the channel watch brings it back.
func (b *Broker) channelStored(topicName, name string, deleted bool) {
	b.setChannel(cluster.ChannelEvent{Channel: cluster.ChannelMeta{Topic: topicName, Name: name}, Deleted: deleted})
}

// CreateChannelIn creates a channel of a topic that may not be open here
// (this node holds none of its partitions, or has not heard of the topic
// yet): the cluster's metadata gets it, and the nodes that hold the topic
// open it.
func (b *Broker) CreateChannelIn(ctx context.Context, topicName, name string, spec ChannelSpec) error {
	if t := b.Topic(topicName); t != nil {
		return b.CreateChannelWith(ctx, t, name, spec)
	}
	if b.cfg.Assignments == nil {
		return ErrTopicNotFound
	}
	_, err := b.storeChannel(ctx, topicName, name, spec)
	return err
}

// DeleteChannel removes a channel everywhere; its consumers are disconnected.
func (b *Broker) DeleteChannel(ctx context.Context, t *Topic, name string) error {
	if !t.HasChannel(name) {
		return ErrChannelNotFound
	}
	if !topic.IsEphemeral(name) && !t.Ephemeral {
		if _, err := b.meta.DeleteChannel(ctx, t.Name, name); err != nil {
			return err
		}
		b.channelStored(t.Name, name, true)
	}
	b.dropChannel(t, name)
	return nil
}

// dropChannel removes a channel's actors and state on this node.
func (b *Broker) dropChannel(t *Topic, name string) {
	t.mu.Lock()
	b.dropChannelLocked(t, name)
	t.mu.Unlock()
}

// dropChannelLocked is dropChannel with t.mu held. The partitions are told
// under the lock, so a subscription that opens the channel after the drop
// is counted asks them for it after they heard of the drop.
func (b *Broker) dropChannelLocked(t *Topic, name string) {
	delete(t.channels, name)
	delete(t.ephemeralLimits, name) // a channel made again starts without
	if t.drops == nil {
		t.drops = make(map[string]uint64)
	}
	t.drops[name]++
	for _, pid := range t.hosted() {
		b.system.Root.Send(pid, &topic.ChannelDeleted{Name: name})
	}
}

// PauseChannel pauses or unpauses a channel on every partition.
func (b *Broker) PauseChannel(ctx context.Context, t *Topic, name string, paused bool) error {
	return setChannelRule(ctx, b, t, name, b.meta.SetChannelPaused, paused, &channel.PauseChanged{Paused: paused})
}

// SkipChannel makes a channel drop what it holds and everything published
// to it until unskipped, on every partition; the mark is in the metadata,
// so it holds on a new leader.
func (b *Broker) SkipChannel(ctx context.Context, t *Topic, name string, skipped bool) error {
	return setChannelRule(ctx, b, t, name, b.meta.SetChannelSkipped, skipped, &channel.SkipChanged{Skipped: skipped})
}

// SetChannelOrdered makes a channel deliver in order (one message per
// partition at a time, FINs confirmed on every ISR member) or not.
func (b *Broker) SetChannelOrdered(ctx context.Context, t *Topic, name string, ordered bool) error {
	return setChannelRule(ctx, b, t, name, b.meta.SetChannelOrdered, ordered, &channel.OrderChanged{Ordered: ordered})
}

// SetChannelRateLimit limits a channel's delivery to kb kilobytes a second
// on every partition, 0 lifting the limit (youzan's /channel/ratelimit);
// the limit is in the metadata, so it holds on a new leader.
func (b *Broker) SetChannelRateLimit(ctx context.Context, t *Topic, name string, kb int64) error {
	return setChannelRule(ctx, b, t, name, b.meta.SetChannelRateLimit, kb, &channel.RateLimitChanged{KB: kb})
}

// SetChannelClientLimit caps at ready the RDY of the channel's consumers
// whose client ID or address starts with prefix, a negative ready lifting
// the cap (youzan's /channel/setclientlimit); the caps are in the
// metadata, so they hold on a new leader.
func (b *Broker) SetChannelClientLimit(ctx context.Context, t *Topic, name, prefix string, ready int64) error {
	if !t.HasChannel(name) {
		return ErrChannelNotFound
	}
	if topic.IsEphemeral(name) || t.Ephemeral {
		t.mu.Lock()
		if t.ephemeralLimits == nil {
			t.ephemeralLimits = make(map[string][]cluster.ClientLimit)
		}
		limits := cluster.WithClientLimit(t.ephemeralLimits[name], prefix, ready)
		t.ephemeralLimits[name] = limits
		t.mu.Unlock()
		t.sendAll(b.system, name, clientLimitsChanged(limits))
		return nil
	}
	limits, err := b.meta.SetChannelClientLimit(ctx, t.Name, name, prefix, ready)
	if err != nil {
		return err
	}
	b.channelChanged(ctx, t, name, clientLimitsChanged(limits))
	return nil
}

// setChannelRule stores one of a channel's flags or limits in the
// metadata (not for ephemeral channels, which have none there) and tells
// the channel's actors here; other nodes hear of it from the metadata's
// watch.
func setChannelRule[V any](ctx context.Context, b *Broker, t *Topic, name string,
	store func(ctx context.Context, topic, channel string, v V) error, v V, changed any) error {
	if !t.HasChannel(name) {
		return ErrChannelNotFound
	}
	if topic.IsEphemeral(name) || t.Ephemeral {
		t.sendAll(b.system, name, changed)
		return nil
	}
	if err := store(ctx, t.Name, name, v); err != nil {
		return err
	}
	b.channelChanged(ctx, t, name, changed)
	return nil
}

// EmptyChannel drops everything the channel holds.
func (b *Broker) EmptyChannel(t *Topic, name string) error {
	if !t.HasChannel(name) {
		return ErrChannelNotFound
	}
	t.sendAll(b.system, name, &channel.Emptied{})
	return nil
}

func channelNames(chans []cluster.ChannelMeta) []string {
	names := make([]string, len(chans))
	for i, c := range chans {
		names[i] = c.Name
	}
	return names
}
