package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/storage"
)

// Settings are youzan's per-topic settings: set at /topic/create, changed
// by /topic/meta/update, kept in the topic's metadata. Zero takes the
// node's flag.
type Settings struct {
	// SyncEvery is commits between fsyncs of each partition (youzan's
	// syncdisk), in place of --sync-every.
	SyncEvery int
	// RetentionDays replaces --retention-days for the topic (youzan's
	// retention); --retention-bytes still applies.
	RetentionDays int
	// DisableChannelAutoCreate: SUB is refused for a channel that was not
	// created by /channel/create.
	DisableChannelAutoCreate bool
	// DedupeWindow replaces --dedupe-window for the topic: within it, a
	// message ID a partition already wrote is not written again
	// (topic.Dedupe).
	DedupeWindow time.Duration
}

// youzan's nsqlookupd refuses /topic/meta/update past these.
const (
	MaxSyncEvery     = 4000
	MaxRetentionDays = 60
)

// MaxDedupeWindow bounds a topic's dedupe window: a new leader reads the
// window's worth of its log before it takes writes.
const MaxDedupeWindow = 24 * time.Hour

// ErrChannelNotRegistered: SUB to a channel of a topic that disables
// creating channels on SUB, before /channel/create made it.
var ErrChannelNotRegistered = errors.New("channel not registered")

// SettingsChange is what /topic/meta/update asks for; nil fields stay.
// Another Replicas moves the topic's partitions to that count
// (changeReplicas).
type SettingsChange struct {
	SyncEvery, RetentionDays *int
	DisableChannelAutoCreate *bool
	DedupeWindow             *time.Duration
	Replicas                 *int
	// UpgradeExt makes the topic an ext topic (youzan's upgradeext); a
	// topic never goes back.
	UpgradeExt bool
}

// ErrReplicasChange: /topic/meta/update asked for another replica count
// of a topic that lives on this node only.
var ErrReplicasChange = errors.New("the replica count of an ephemeral topic cannot be changed")

func settingsOf(m cluster.TopicMeta) *Settings {
	return &Settings{SyncEvery: int(m.SyncEvery), RetentionDays: int(m.RetentionDays), DisableChannelAutoCreate: m.DisableChannelAutoCreate,
		DedupeWindow: time.Duration(m.DedupeWindowMs) * time.Millisecond}
}

func (s Settings) into(m *cluster.TopicMeta) {
	m.SyncEvery, m.RetentionDays, m.DisableChannelAutoCreate = int32(s.SyncEvery), int32(s.RetentionDays), s.DisableChannelAutoCreate
	m.DedupeWindowMs = s.DedupeWindow.Milliseconds()
}

func (c SettingsChange) apply(s *Settings) {
	if c.SyncEvery != nil {
		s.SyncEvery = *c.SyncEvery
	}
	if c.RetentionDays != nil {
		s.RetentionDays = *c.RetentionDays
	}
	if c.DisableChannelAutoCreate != nil {
		s.DisableChannelAutoCreate = *c.DisableChannelAutoCreate
	}
	if c.DedupeWindow != nil {
		s.DedupeWindow = *c.DedupeWindow
	}
}

// Settings are the topic's settings as this node applies them.
func (t *Topic) Settings() Settings {
	if s := t.settings.Load(); s != nil {
		return *s
	}
	return Settings{}
}

// syncEvery is the fsync count a partition of a topic with these settings
// uses.
func (b *Broker) syncEvery(s Settings) int {
	if s.SyncEvery > 0 {
		return s.SyncEvery
	}
	return b.cfg.Storage.SyncEvery
}

// retention is the policy a partition of a topic with these settings
// applies.
func (b *Broker) retention(s Settings) storage.RetentionPolicy {
	p := b.cfg.Retention
	if s.RetentionDays > 0 {
		p.MaxAge = time.Duration(s.RetentionDays) * 24 * time.Hour
	}
	return p
}

// dedupe is the dedupe setting a partition of a topic with these settings
// applies.
func (b *Broker) dedupe(s Settings) topic.DedupeConfig {
	d := b.cfg.Dedupe
	if s.DedupeWindow > 0 {
		d.Window = s.DedupeWindow
	}
	return d
}

// UpdateSettings changes a topic's settings cluster-wide (youzan's
// /topic/meta/update). Every node that holds a partition applies them
// when its topic watch brings the change, this one included, so the
// partitions hear the changes in the order etcd made them.
func (b *Broker) UpdateSettings(ctx context.Context, name string, change SettingsChange) (Settings, error) {
	if err := validSettings(change); err != nil {
		return Settings{}, err
	}
	if t := b.Topic(name); t != nil && t.Ephemeral {
		// No metadata and no watch: the topic lives on this node only.
		if change.Replicas != nil && *change.Replicas != 1 {
			return Settings{}, fmt.Errorf("%w: %s has 1", ErrReplicasChange, name)
		}
		s := t.Settings()
		change.apply(&s)
		b.applySettings(t, &s)
		if change.UpgradeExt {
			t.ext.Store(true)
		}
		return s, nil
	}
	if change.Replicas != nil {
		m, ok, err := b.meta.Topic(ctx, name)
		if err != nil {
			return Settings{}, err
		}
		if !ok {
			return Settings{}, ErrTopicNotFound
		}
		if int(m.Replicas) != *change.Replicas {
			if err := b.changeReplicas(ctx, name, *change.Replicas); err != nil {
				return Settings{}, err
			}
		}
	}
	m, err := b.meta.UpdateTopic(ctx, name, func(m *cluster.TopicMeta) {
		s := settingsOf(*m)
		change.apply(s)
		s.into(m)
		m.Ext = m.Ext || change.UpgradeExt
	})
	if errors.Is(err, cluster.ErrTopicNotFound) {
		return Settings{}, ErrTopicNotFound
	}
	if err != nil {
		return Settings{}, err
	}
	return *settingsOf(m), nil
}

// ErrInvalidSettings: a setting out of its range.
var ErrInvalidSettings = errors.New("invalid topic setting")

func validSettings(c SettingsChange) error {
	if c.SyncEvery != nil && (*c.SyncEvery < 0 || *c.SyncEvery > MaxSyncEvery) {
		return fmt.Errorf("%w: syncdisk %d not in 0..%d", ErrInvalidSettings, *c.SyncEvery, MaxSyncEvery)
	}
	if c.RetentionDays != nil && (*c.RetentionDays < 0 || *c.RetentionDays > MaxRetentionDays) {
		return fmt.Errorf("%w: retention %d not in 0..%d days", ErrInvalidSettings, *c.RetentionDays, MaxRetentionDays)
	}
	if c.DedupeWindow != nil {
		if err := ValidDedupeWindow(*c.DedupeWindow); err != nil {
			return err
		}
	}
	return nil
}

// ValidDedupeWindow checks a topic's dedupe window: whole milliseconds, as
// the metadata keeps it, from 0 to MaxDedupeWindow.
func ValidDedupeWindow(d time.Duration) error {
	if d < 0 || d > MaxDedupeWindow || d%time.Millisecond != 0 {
		return fmt.Errorf("%w: dedupe_window %s not whole milliseconds in 0..%s", ErrInvalidSettings, d, MaxDedupeWindow)
	}
	return nil
}

// applySettings hands changed settings to the topic's partitions on this
// node.
func (b *Broker) applySettings(t *Topic, s *Settings) {
	b.changeSettings(t, func() *Settings { return s })
}

// settingsFromView applies what the topic watch last said of a topic just
// registered here: a change the watch brought while the topic was
// starting found no topic to apply to.
func (b *Broker) settingsFromView(t *Topic) {
	b.changeSettings(t, func() *Settings {
		if v, ok := b.currentView().topics.get(t.Name); ok && v.meta.CreatedUnixNano == t.created {
			return settingsOf(v.meta)
		}
		return nil
	})
}

// changeSettings applies the settings next returns, nil for none. It
// runs next under the topic's settings lock, so of two changes racing,
// the one that read later is applied later.
func (b *Broker) changeSettings(t *Topic, next func() *Settings) {
	t.settingsMu.Lock()
	defer t.settingsMu.Unlock()
	s := next()
	if s == nil {
		return
	}
	if old := t.settings.Swap(s); old != nil && *old == *s {
		return
	}
	msg := b.settingsChanged(*s)
	for _, pid := range t.hosted() {
		b.system.Root.Send(pid, msg)
	}
}

// resendSettings gives a partition started while the topic was open here
// the settings as they are now: a change applied between its start and
// its registration in the topic did not reach it. The lock keeps a
// change made meanwhile from arriving before this older copy.
func (b *Broker) resendSettings(t *Topic, pid *actor.PID) {
	t.settingsMu.Lock()
	defer t.settingsMu.Unlock()
	b.system.Root.Send(pid, b.settingsChanged(t.Settings()))
}

func (b *Broker) settingsChanged(s Settings) *topic.SettingsChanged {
	return &topic.SettingsChanged{SyncEvery: b.syncEvery(s), Retention: b.retention(s), Dedupe: b.dedupe(s)}
}

// channelRegistered tells whether a channel this node has not opened was
// created elsewhere in the cluster, as the channel watch may not have
// brought it yet; ErrChannelNotRegistered if not.
func (b *Broker) channelRegistered(ctx context.Context, t *Topic, name string) error {
	if !t.Ephemeral && !topic.IsEphemeral(name) {
		chans, err := b.meta.Channels(ctx, t.Name)
		if err != nil {
			return err
		}
		for _, c := range chans {
			if c.Name == name {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: %s has no channel %s, and creates none on SUB: create it with /channel/create", ErrChannelNotRegistered, t.Name, name)
}
