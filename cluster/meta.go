package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultMetaPrefix is the etcd key prefix used when NewMetaStore gets "".
const DefaultMetaPrefix = "/partita/"

// maxNameLength and the allowed characters are NSQ's rules for topic and
// channel names; they also keep '/' out of etcd keys.
const maxNameLength = 64

var (
	ErrTopicNotFound   = errors.New("topic not found")
	ErrChannelNotFound = errors.New("channel not found")
)

// MetaStore keeps topic and channel metadata in etcd:
//
//	<prefix>topics/<topic>               TopicMeta
//	<prefix>channels/<topic>/<channel>   ChannelMeta
//
// Every write is a single etcd transaction, so concurrent nodes never see a
// channel without its topic.
type MetaStore struct {
	cli    *clientv3.Client
	prefix string
}

func NewMetaStore(cli *clientv3.Client, prefix string) *MetaStore {
	if prefix == "" {
		prefix = DefaultMetaPrefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return &MetaStore{cli: cli, prefix: prefix}
}

func (s *MetaStore) topicKey(topic string) string { return s.prefix + "topics/" + topic }

func (s *MetaStore) channelPrefix(topic string) string {
	return s.prefix + "channels/" + topic + "/"
}

func (s *MetaStore) channelKey(topic, channel string) string {
	return s.channelPrefix(topic) + channel
}

// CreateTopic stores a new topic. An existing topic is returned unchanged
// with created == false, whatever partitions and replicas were asked for.
func (s *MetaStore) CreateTopic(ctx context.Context, name string, partitions, replicas int32) (meta TopicMeta, created bool, err error) {
	return s.CreateTopicMeta(ctx, TopicMeta{Name: name, Partitions: partitions, Replicas: replicas})
}

// CreateTopicMeta is CreateTopic with every field of the topic given;
// CreatedUnixNano is set here.
func (s *MetaStore) CreateTopicMeta(ctx context.Context, meta TopicMeta) (TopicMeta, bool, error) {
	name, partitions, replicas := meta.Name, meta.Partitions, meta.Replicas
	if err := validName("topic", name); err != nil {
		return TopicMeta{}, false, err
	}
	if partitions < 1 {
		return TopicMeta{}, false, fmt.Errorf("create topic %q: partitions must be at least 1, got %d", name, partitions)
	}
	if replicas < 1 {
		return TopicMeta{}, false, fmt.Errorf("create topic %q: replicas must be at least 1, got %d", name, replicas)
	}
	meta.CreatedUnixNano = time.Now().UnixNano()
	val, err := marshalTopic(meta)
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("create topic %q: %w", name, err)
	}
	key := s.topicKey(name)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("create topic %q: %w", name, err)
	}
	if resp.Succeeded {
		return meta, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return TopicMeta{}, false, fmt.Errorf("create topic %q: key %s existed but could not be read", name, key)
	}
	meta, err = decodeTopic(kvs[0])
	return meta, false, err
}

// Topic returns the topic's metadata and whether it exists.
func (s *MetaStore) Topic(ctx context.Context, name string) (TopicMeta, bool, error) {
	if err := validName("topic", name); err != nil {
		return TopicMeta{}, false, err
	}
	resp, err := s.cli.Get(ctx, s.topicKey(name))
	if err != nil {
		return TopicMeta{}, false, fmt.Errorf("get topic %q: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return TopicMeta{}, false, nil
	}
	meta, err := decodeTopic(resp.Kvs[0])
	return meta, err == nil, err
}

// Topics returns every topic, sorted by name.
func (s *MetaStore) Topics(ctx context.Context) ([]TopicMeta, error) {
	resp, err := s.cli.Get(ctx, s.topicKey(""), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	topics := make([]TopicMeta, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		meta, err := decodeTopic(kv)
		if err != nil {
			return nil, err
		}
		topics = append(topics, meta)
	}
	return topics, nil
}

// DeleteTopic removes the topic and all its channels in one transaction and
// reports whether the topic existed.
func (s *MetaStore) DeleteTopic(ctx context.Context, name string) (bool, error) {
	if err := validName("topic", name); err != nil {
		return false, err
	}
	key := s.topicKey(name)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).
		Then(clientv3.OpDelete(key), clientv3.OpDelete(s.channelPrefix(name), clientv3.WithPrefix())).
		Commit()
	if err != nil {
		return false, fmt.Errorf("delete topic %q: %w", name, err)
	}
	return resp.Succeeded, nil
}

// SetTopicPaused records whether the topic is paused.
func (s *MetaStore) SetTopicPaused(ctx context.Context, name string, paused bool) error {
	if err := validName("topic", name); err != nil {
		return err
	}
	found, err := s.update(ctx, s.topicKey(name), func(kv *mvccpb.KeyValue) ([]byte, error) {
		meta, err := decodeTopic(kv)
		if err != nil || meta.Paused == paused {
			return nil, err
		}
		meta.Paused = paused
		return marshalTopic(meta)
	})
	if err != nil {
		return fmt.Errorf("pause topic %q: %w", name, err)
	}
	if !found {
		return fmt.Errorf("pause topic %q: %w", name, ErrTopicNotFound)
	}
	return nil
}

// UpdateTopic rewrites the topic's metadata with change, which edits a
// copy of what etcd holds (compare-and-swap, redone after a concurrent
// write), and returns the metadata as stored. A change that leaves the
// metadata as it was writes nothing, so watchers hear of no change.
func (s *MetaStore) UpdateTopic(ctx context.Context, name string, change func(*TopicMeta)) (TopicMeta, error) {
	if err := validName("topic", name); err != nil {
		return TopicMeta{}, err
	}
	var stored TopicMeta
	found, err := s.update(ctx, s.topicKey(name), func(kv *mvccpb.KeyValue) ([]byte, error) {
		meta, err := decodeTopic(kv)
		if err != nil {
			return nil, err
		}
		stored = meta
		change(&stored)
		// The incarnation is not the caller's to change: a topic recreated
		// under the name in between must not take the old one's identity.
		stored.Name, stored.CreatedUnixNano = meta.Name, meta.CreatedUnixNano
		if stored == meta {
			return nil, nil
		}
		return marshalTopic(stored)
	})
	if err != nil {
		return TopicMeta{}, fmt.Errorf("update topic %q: %w", name, err)
	}
	if !found {
		return TopicMeta{}, fmt.Errorf("update topic %q: %w", name, ErrTopicNotFound)
	}
	return stored, nil
}

// CreateChannel stores a new channel of an existing topic and reports
// whether it was new.
func (s *MetaStore) CreateChannel(ctx context.Context, topic, channel string) (created bool, err error) {
	return s.CreateChannelWith(ctx, ChannelMeta{Topic: topic, Name: channel})
}

// CreateChannelWith is CreateChannel of a channel with its settings; an
// existing channel is left as it is.
func (s *MetaStore) CreateChannelWith(ctx context.Context, m ChannelMeta) (created bool, err error) {
	topic, channel := m.Topic, m.Name
	if err := validChannel(topic, channel); err != nil {
		return false, err
	}
	val, err := marshalChannel(m)
	if err != nil {
		return false, fmt.Errorf("create channel %q of topic %q: %w", channel, topic, err)
	}
	tkey, ckey := s.topicKey(topic), s.channelKey(topic, channel)
	resp, err := s.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(tkey), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(ckey), "=", 0)).
		Then(clientv3.OpPut(ckey, string(val))).
		Else(clientv3.OpGet(tkey, clientv3.WithCountOnly())).
		Commit()
	if err != nil {
		return false, fmt.Errorf("create channel %q of topic %q: %w", channel, topic, err)
	}
	if resp.Succeeded {
		return true, nil
	}
	if resp.Responses[0].GetResponseRange().GetCount() == 0 {
		return false, fmt.Errorf("create channel %q of topic %q: %w", channel, topic, ErrTopicNotFound)
	}
	return false, nil
}

// DeleteChannel removes the channel and reports whether it existed.
func (s *MetaStore) DeleteChannel(ctx context.Context, topic, channel string) (bool, error) {
	if err := validChannel(topic, channel); err != nil {
		return false, err
	}
	resp, err := s.cli.Delete(ctx, s.channelKey(topic, channel))
	if err != nil {
		return false, fmt.Errorf("delete channel %q of topic %q: %w", channel, topic, err)
	}
	return resp.Deleted > 0, nil
}

// SetChannelPaused records whether the channel is paused.
func (s *MetaStore) SetChannelPaused(ctx context.Context, topic, channel string, paused bool) error {
	return s.setChannelFlag(ctx, topic, channel, "pause", func(m *ChannelMeta) *bool { return &m.Paused }, paused)
}

// SetChannelOrdered marks a channel ordered or not.
func (s *MetaStore) SetChannelOrdered(ctx context.Context, topic, channel string, ordered bool) error {
	return s.setChannelFlag(ctx, topic, channel, "order", func(m *ChannelMeta) *bool { return &m.Ordered }, ordered)
}

// SetChannelSkipped records whether the channel is skipped.
func (s *MetaStore) SetChannelSkipped(ctx context.Context, topic, channel string, skipped bool) error {
	return s.setChannelFlag(ctx, topic, channel, "skip", func(m *ChannelMeta) *bool { return &m.Skipped }, skipped)
}

// SetChannelRateLimit records the channel's delivery limit in kilobytes a
// second, 0 for none.
func (s *MetaStore) SetChannelRateLimit(ctx context.Context, topic, channel string, kb int64) error {
	return s.changeChannel(ctx, topic, channel, "rate limit", func(m *ChannelMeta) bool {
		changed := m.RateLimitKB != kb
		m.RateLimitKB = kb
		return changed
	})
}

// SetChannelClientLimit caps the RDY of the channel's consumers whose
// client ID or address starts with prefix at ready, a negative ready
// removing the cap; it returns the channel's caps as stored.
func (s *MetaStore) SetChannelClientLimit(ctx context.Context, topic, channel, prefix string, ready int64) ([]ClientLimit, error) {
	var limits []ClientLimit
	err := s.changeChannel(ctx, topic, channel, "client limit", func(m *ChannelMeta) bool {
		was := m.ClientLimits
		m.ClientLimits = WithClientLimit(was, prefix, ready)
		limits = m.ClientLimits
		return !slices.Equal(was, m.ClientLimits)
	})
	return limits, err
}

// SetChannelMaxAttempts records the channel's max_attempts, 0 for none.
func (s *MetaStore) SetChannelMaxAttempts(ctx context.Context, topic, channel string, n uint16) error {
	return s.changeChannel(ctx, topic, channel, "set max_attempts of", func(m *ChannelMeta) bool {
		changed := m.MaxAttempts != n
		m.MaxAttempts = n
		return changed
	})
}

// setChannelFlag stores one of a channel's flags (what names the change
// in errors).
func (s *MetaStore) setChannelFlag(ctx context.Context, topic, channel, what string, flag func(*ChannelMeta) *bool, v bool) error {
	return s.changeChannel(ctx, topic, channel, what, func(m *ChannelMeta) bool {
		changed := *flag(m) != v
		*flag(m) = v
		return changed
	})
}

// changeChannel applies change to a channel's metadata, leaving the key
// alone when change reports it holds the value already; what names the
// change in errors.
func (s *MetaStore) changeChannel(ctx context.Context, topic, channel, what string, change func(*ChannelMeta) bool) error {
	if err := validChannel(topic, channel); err != nil {
		return err
	}
	found, err := s.update(ctx, s.channelKey(topic, channel), func(kv *mvccpb.KeyValue) ([]byte, error) {
		meta, err := decodeChannel(kv)
		if err != nil || !change(&meta) {
			return nil, err
		}
		return marshalChannel(meta)
	})
	if err != nil {
		return fmt.Errorf("%s channel %q of topic %q: %w", what, channel, topic, err)
	}
	if !found {
		return fmt.Errorf("%s channel %q of topic %q: %w", what, channel, topic, ErrChannelNotFound)
	}
	return nil
}

// Channel reads one channel's metadata as stored now; found is false when
// it does not exist.
func (s *MetaStore) Channel(ctx context.Context, topic, channel string) (meta ChannelMeta, found bool, err error) {
	if err := validChannel(topic, channel); err != nil {
		return ChannelMeta{}, false, err
	}
	resp, err := s.cli.Get(ctx, s.channelKey(topic, channel))
	if err != nil {
		return ChannelMeta{}, false, fmt.Errorf("read channel %q of topic %q: %w", channel, topic, err)
	}
	if len(resp.Kvs) == 0 {
		return ChannelMeta{}, false, nil
	}
	meta, err = decodeChannel(resp.Kvs[0])
	return meta, err == nil, err
}

// Channels returns the topic's channels sorted by name; none if the topic
// does not exist.
func (s *MetaStore) Channels(ctx context.Context, topic string) ([]ChannelMeta, error) {
	if err := validName("topic", topic); err != nil {
		return nil, err
	}
	resp, err := s.cli.Get(ctx, s.channelPrefix(topic), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list channels of topic %q: %w", topic, err)
	}
	channels := make([]ChannelMeta, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		meta, err := decodeChannel(kv)
		if err != nil {
			return nil, err
		}
		channels = append(channels, meta)
	}
	return channels, nil
}

// update rewrites key with change(current value), compare-and-swapping on
// the key's ModRevision and retrying when another writer got in between.
// change returns nil to leave the value as it is. found is false when the
// key does not exist.
func (s *MetaStore) update(ctx context.Context, key string, change func(*mvccpb.KeyValue) ([]byte, error)) (found bool, err error) {
	resp, err := s.cli.Get(ctx, key)
	if err != nil {
		return false, err
	}
	kvs := resp.Kvs
	for {
		if len(kvs) == 0 {
			return false, nil
		}
		val, err := change(kvs[0])
		if err != nil || val == nil {
			return true, err
		}
		tx, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", kvs[0].ModRevision)).
			Then(clientv3.OpPut(key, string(val))).
			Else(clientv3.OpGet(key)).
			Commit()
		if err != nil {
			return true, err
		}
		if tx.Succeeded {
			return true, nil
		}
		kvs = tx.Responses[0].GetResponseRange().GetKvs()
	}
}

func decodeTopic(kv *mvccpb.KeyValue) (TopicMeta, error) {
	meta, err := unmarshalTopic(kv.Value)
	if err != nil {
		return TopicMeta{}, fmt.Errorf("decode topic meta at %s: %w", kv.Key, err)
	}
	return meta, nil
}

func decodeChannel(kv *mvccpb.KeyValue) (ChannelMeta, error) {
	meta, err := unmarshalChannel(kv.Value)
	if err != nil {
		return ChannelMeta{}, fmt.Errorf("decode channel meta at %s: %w", kv.Key, err)
	}
	meta.Revision = kv.ModRevision
	return meta, nil
}

func validChannel(topic, channel string) error {
	if err := validName("topic", topic); err != nil {
		return err
	}
	return validName("channel", channel)
}

// validName applies NSQ's naming rule: 1-64 characters from [.a-zA-Z0-9_-],
// optionally ending in "#ephemeral".
// ValidTopicName says why name cannot be a topic's, nil when it can.
func ValidTopicName(name string) error { return validName("topic", name) }

func validName(kind, name string) error {
	base := strings.TrimSuffix(name, "#ephemeral")
	if base == "" || len(name) > maxNameLength {
		return fmt.Errorf("invalid %s name %q: must be 1-%d characters", kind, name, maxNameLength)
	}
	for i := 0; i < len(base); i++ {
		if !nameByte(base[i]) {
			return fmt.Errorf("invalid %s name %q: only letters, digits, '.', '_', '-' and a #ephemeral suffix are allowed", kind, name)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '-'
}

// ChannelEvent is a channel created, changed or deleted anywhere in the
// cluster.
type ChannelEvent struct {
	Channel ChannelMeta
	Deleted bool
}

// WatchChannels emits every channel that exists, then every change, until
// ctx ends, so each node keeps channels cluster-wide (a channel created on
// one node keeps what is published before its consumers connect, on every
// node that leads a partition of its topic). A channel deleted while the
// watch was down (etcd unreachable, history compacted) is still emitted as
// deleted: each fresh listing is compared with the channels seen before it.
func (s *MetaStore) WatchChannels(ctx context.Context) <-chan ChannelEvent {
	out := make(chan ChannelEvent)
	prefix := s.prefix + "channels/"
	known := map[string]bool{} // keys
	send := func(ev ChannelEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	deleted := func(key string) bool {
		delete(known, key)
		topic, name, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
		return !ok || send(ChannelEvent{Channel: ChannelMeta{Topic: topic, Name: name}, Deleted: true})
	}
	reset := func(kvs []*mvccpb.KeyValue) bool {
		listed := make(map[string]bool, len(kvs))
		for _, kv := range kvs {
			listed[string(kv.Key)] = true
		}
		for key := range known {
			if !listed[key] && !deleted(key) {
				return false
			}
		}
		known = listed
		for _, kv := range kvs {
			if m, err := decodeChannel(kv); err == nil && !send(ChannelEvent{Channel: m}) {
				return false
			}
		}
		return true
	}
	change := func(events []*clientv3.Event) bool {
		for _, ev := range events {
			key := string(ev.Kv.Key)
			if ev.Type == mvccpb.DELETE {
				if !deleted(key) {
					return false
				}
				continue
			}
			known[key] = true
			if m, err := decodeChannel(ev.Kv); err == nil && !send(ChannelEvent{Channel: m}) {
				return false
			}
		}
		return true
	}
	go func() {
		defer close(out)
		followPrefix(ctx, s.cli, prefix, reset, change)
	}()
	return out
}

// TopicEvent is a topic created or changed anywhere in the cluster, or,
// with Deleted, one deleted, as its metadata was before the deletion.
type TopicEvent struct {
	Topic   TopicMeta
	Deleted bool
}

// WatchTopics emits every topic that exists, then every change, until ctx
// ends. A deletion carries the incarnation deleted (CreatedUnixNano), so a
// node drops exactly that one and never a newer one created under the same
// name meanwhile. A deletion made while the watch was down (etcd
// unreachable, history compacted) is still emitted: each fresh listing is
// compared with the topics seen before it, and emitted whole after the
// deletions it reveals, so a consumer may see a topic twice.
func (s *MetaStore) WatchTopics(ctx context.Context) <-chan TopicEvent {
	out := make(chan TopicEvent)
	prefix := s.prefix + "topics/"
	known := map[string]TopicMeta{} // by key
	emit := func(ev TopicEvent) bool {
		select {
		case out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	reset := func(kvs []*mvccpb.KeyValue) bool {
		listed := make(map[string]TopicMeta, len(kvs))
		var metas []TopicMeta
		for _, kv := range kvs {
			if m, err := decodeTopic(kv); err == nil {
				listed[string(kv.Key)] = m
				metas = append(metas, m)
			}
		}
		for key, m := range known {
			if now, ok := listed[key]; !ok || now.CreatedUnixNano != m.CreatedUnixNano {
				if !emit(TopicEvent{Topic: m, Deleted: true}) {
					return false
				}
			}
		}
		known = listed
		for _, m := range metas {
			if !emit(TopicEvent{Topic: m}) {
				return false
			}
		}
		return true
	}
	change := func(evs []*clientv3.Event) bool {
		for _, ev := range evs {
			key := string(ev.Kv.Key)
			if ev.Type == mvccpb.PUT {
				if m, err := decodeTopic(ev.Kv); err == nil {
					known[key] = m
					if !emit(TopicEvent{Topic: m}) {
						return false
					}
				}
				continue
			}
			if m, ok := known[key]; ok {
				delete(known, key)
				if !emit(TopicEvent{Topic: m, Deleted: true}) {
					return false
				}
			}
		}
		return true
	}
	go func() {
		defer close(out)
		followPrefix(ctx, s.cli, prefix, reset, change)
	}()
	return out
}
