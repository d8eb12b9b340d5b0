package cluster

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/partitamq/partita/messages"
)

func newTestStore(t *testing.T) (*MetaStore, *clientv3.Client) {
	t.Helper()
	e, _ := startTestEtcd(t, t.TempDir())
	return NewMetaStore(e.Client(), ""), e.Client()
}

func mustCreateTopic(t *testing.T, s *MetaStore, name string) TopicMeta {
	t.Helper()
	meta, _, err := s.CreateTopic(context.Background(), name, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

func mustCreateChannel(t *testing.T, s *MetaStore, topic, channel string) {
	t.Helper()
	if _, err := s.CreateChannel(context.Background(), topic, channel); err != nil {
		t.Fatal(err)
	}
}

func channelNames(t *testing.T, s *MetaStore, topic string) []string {
	t.Helper()
	channels, err := s.Channels(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range channels {
		if c.Topic != topic {
			t.Errorf("channel %q lists topic %q, want %q", c.Name, c.Topic, topic)
		}
		names = append(names, c.Name)
	}
	return names
}

func TestCreateTopicIsIdempotent(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()

	first, created, err := s.CreateTopic(ctx, "orders", 8, 3)
	if err != nil || !created {
		t.Fatalf("first create: created=%v err=%v", created, err)
	}
	if first.Name != "orders" || first.Partitions != 8 || first.Replicas != 3 || first.Paused || first.CreatedUnixNano == 0 {
		t.Fatalf("first create returned %+v", first)
	}
	again, created, err := s.CreateTopic(ctx, "orders", 2, 1)
	if err != nil || created {
		t.Fatalf("second create: created=%v err=%v", created, err)
	}
	if again != first {
		t.Errorf("second create returned %+v, want the original %+v", again, first)
	}
	stored, ok, err := s.Topic(ctx, "orders")
	if err != nil || !ok || stored != first {
		t.Errorf("Topic = %+v, %v, %v; want %+v", stored, ok, err, first)
	}
	if _, ok, err := s.Topic(ctx, "missing"); ok || err != nil {
		t.Errorf("Topic(missing) = %v, %v; want false, nil", ok, err)
	}
}

func TestTopicsAreSortedByName(t *testing.T) {
	s, _ := newTestStore(t)
	for _, name := range []string{"b", "a.b", "c", "a", "a-b"} {
		mustCreateTopic(t, s, name)
	}
	topics, err := s.Topics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tm := range topics {
		names = append(names, tm.Name)
	}
	if got, want := strings.Join(names, " "), "a a-b a.b b c"; got != want {
		t.Errorf("Topics = %s, want %s", got, want)
	}
}

func TestMetaRejectsBadInput(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	mustCreateTopic(t, s, "t")

	long := strings.Repeat("x", 65)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"empty topic", func() error { _, _, err := s.CreateTopic(ctx, "", 1, 1); return err }, "invalid topic name"},
		{"slash in topic", func() error { _, _, err := s.CreateTopic(ctx, "a/b", 1, 1); return err }, "invalid topic name"},
		{"long topic", func() error { _, _, err := s.CreateTopic(ctx, long, 1, 1); return err }, "1-64 characters"},
		{"only ephemeral suffix", func() error { _, _, err := s.CreateTopic(ctx, "#ephemeral", 1, 1); return err }, "invalid topic name"},
		{"zero partitions", func() error { _, _, err := s.CreateTopic(ctx, "p", 0, 1); return err }, "partitions"},
		{"negative replicas", func() error { _, _, err := s.CreateTopic(ctx, "p", 1, -1); return err }, "replicas"},
		{"bad channel", func() error { _, err := s.CreateChannel(ctx, "t", "c d"); return err }, "invalid channel name"},
		{"bad topic of channel", func() error { _, err := s.CreateChannel(ctx, "t/x", "c"); return err }, "invalid topic name"},
		{"pause bad topic", func() error { return s.SetTopicPaused(ctx, "", true) }, "invalid topic name"},
		{"list channels of bad topic", func() error { _, err := s.Channels(ctx, "a*"); return err }, "invalid topic name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	topics, err := s.Topics(ctx)
	if err != nil || len(topics) != 1 {
		t.Errorf("after bad input Topics = %+v, %v; want only t", topics, err)
	}
	if names := channelNames(t, s, "t"); len(names) != 0 {
		t.Errorf("after bad input channels = %v", names)
	}
	if _, _, err := s.CreateTopic(ctx, "tmp#ephemeral", 1, 1); err != nil {
		t.Errorf("ephemeral topic name rejected: %v", err)
	}
}

func TestChannels(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()

	if _, err := s.CreateChannel(ctx, "t", "c"); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("channel of missing topic: err = %v, want ErrTopicNotFound", err)
	}
	mustCreateTopic(t, s, "t")
	for _, c := range []string{"z", "a", "m"} {
		if created, err := s.CreateChannel(ctx, "t", c); err != nil || !created {
			t.Fatalf("create %s: created=%v err=%v", c, created, err)
		}
	}
	if created, err := s.CreateChannel(ctx, "t", "a"); err != nil || created {
		t.Errorf("create existing channel: created=%v err=%v", created, err)
	}
	if got := strings.Join(channelNames(t, s, "t"), " "); got != "a m z" {
		t.Errorf("channels = %s, want a m z", got)
	}
	if deleted, err := s.DeleteChannel(ctx, "t", "m"); err != nil || !deleted {
		t.Errorf("delete m: deleted=%v err=%v", deleted, err)
	}
	if deleted, err := s.DeleteChannel(ctx, "t", "m"); err != nil || deleted {
		t.Errorf("delete m again: deleted=%v err=%v", deleted, err)
	}
	if got := strings.Join(channelNames(t, s, "t"), " "); got != "a z" {
		t.Errorf("channels after delete = %s, want a z", got)
	}
	if names := channelNames(t, s, "missing"); len(names) != 0 {
		t.Errorf("channels of missing topic = %v", names)
	}
}

func TestDeleteTopicDeletesItsChannels(t *testing.T) {
	s, cli := newTestStore(t)
	ctx := context.Background()
	mustCreateTopic(t, s, "t")
	mustCreateTopic(t, s, "tx")
	mustCreateChannel(t, s, "t", "c1")
	mustCreateChannel(t, s, "t", "c2")
	mustCreateChannel(t, s, "tx", "c1")

	if deleted, err := s.DeleteTopic(ctx, "t"); err != nil || !deleted {
		t.Fatalf("delete t: deleted=%v err=%v", deleted, err)
	}
	if _, ok, err := s.Topic(ctx, "t"); ok || err != nil {
		t.Errorf("topic t still there: %v, %v", ok, err)
	}
	resp, err := cli.Get(ctx, DefaultMetaPrefix+"channels/t/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != 0 {
		t.Errorf("%d channel keys of t left (err %v)", resp.Count, err)
	}
	if got := strings.Join(channelNames(t, s, "tx"), " "); got != "c1" {
		t.Errorf("channels of tx = %q, want c1: a topic whose name starts like a deleted one lost its channels", got)
	}
	if deleted, err := s.DeleteTopic(ctx, "t"); err != nil || deleted {
		t.Errorf("delete t again: deleted=%v err=%v", deleted, err)
	}

	// A recreated topic starts without the old channels.
	mustCreateTopic(t, s, "t")
	if names := channelNames(t, s, "t"); len(names) != 0 {
		t.Errorf("recreated topic has channels %v", names)
	}
}

func TestSetPaused(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	mustCreateTopic(t, s, "t")
	mustCreateChannel(t, s, "t", "c")

	for _, paused := range []bool{true, true, false} {
		if err := s.SetTopicPaused(ctx, "t", paused); err != nil {
			t.Fatalf("SetTopicPaused(%v): %v", paused, err)
		}
		if meta, _, _ := s.Topic(ctx, "t"); meta.Paused != paused || meta.Partitions != 4 {
			t.Errorf("after SetTopicPaused(%v) topic = %+v", paused, meta)
		}
		if err := s.SetChannelPaused(ctx, "t", "c", paused); err != nil {
			t.Fatalf("SetChannelPaused(%v): %v", paused, err)
		}
		if channels, _ := s.Channels(ctx, "t"); len(channels) != 1 || channels[0].Paused != paused {
			t.Errorf("after SetChannelPaused(%v) channels = %+v", paused, channels)
		}
	}
	if err := s.SetTopicPaused(ctx, "missing", true); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("pause missing topic: err = %v, want ErrTopicNotFound", err)
	}
	if err := s.SetChannelPaused(ctx, "t", "missing", true); !errors.Is(err, ErrChannelNotFound) {
		t.Errorf("pause missing channel: err = %v, want ErrChannelNotFound", err)
	}
}

// TestSetTopicPausedKeepsConcurrentWrites checks the compare-and-swap: a
// writer that changes the record between our read and our write must not
// be overwritten.
func TestSetTopicPausedKeepsConcurrentWrites(t *testing.T) {
	s, cli := newTestStore(t)
	ctx := context.Background()
	mustCreateTopic(t, s, "t")
	key := s.topicKey("t")

	calls := 0
	found, err := s.update(ctx, key, func(kv *mvccpb.KeyValue) ([]byte, error) {
		calls++
		meta, err := decodeTopic(kv)
		if err != nil {
			return nil, err
		}
		if calls == 1 {
			racer := meta
			racer.Partitions = 9
			val, _ := marshalTopic(racer)
			if _, err := cli.Put(ctx, key, string(val)); err != nil {
				return nil, err
			}
		}
		meta.Paused = true
		return marshalTopic(meta)
	})
	if err != nil || !found {
		t.Fatalf("update: found=%v err=%v", found, err)
	}
	if calls != 2 {
		t.Errorf("change ran %d times, want 2 (one retry after the conflict)", calls)
	}
	if meta, _, _ := s.Topic(ctx, "t"); !meta.Paused || meta.Partitions != 9 {
		t.Errorf("topic = %+v, want paused with the racing writer's 9 partitions", meta)
	}

	// The same through the public API: flipping pause while another writer
	// counts partitions up by compare-and-swap must lose no increment.
	const bumps = 20
	var wg sync.WaitGroup
	errs := make(chan error, 2*bumps)
	for i := range bumps {
		wg.Go(func() { errs <- s.SetTopicPaused(ctx, "t", i%2 == 0) })
		wg.Go(func() {
			_, err := s.update(ctx, key, func(kv *mvccpb.KeyValue) ([]byte, error) {
				meta, err := decodeTopic(kv)
				if err != nil {
					return nil, err
				}
				meta.Partitions++
				return marshalTopic(meta)
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if meta, _, _ := s.Topic(ctx, "t"); meta.Partitions != 9+bumps {
		t.Errorf("partitions = %d, want %d: a pause overwrote a concurrent update", meta.Partitions, 9+bumps)
	}
}

func TestConcurrentCreateTopicCreatesOnce(t *testing.T) {
	s, _ := newTestStore(t)
	const n = 8
	type result struct {
		meta    TopicMeta
		created bool
		err     error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			meta, created, err := s.CreateTopic(context.Background(), "race", int32(i+1), 1)
			results <- result{meta, created, err}
		})
	}
	wg.Wait()
	close(results)

	var winners []TopicMeta
	var all []TopicMeta
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.created {
			winners = append(winners, r.meta)
		}
		all = append(all, r.meta)
	}
	if len(winners) != 1 {
		t.Fatalf("%d callers created the topic, want exactly 1", len(winners))
	}
	for _, m := range all {
		if m != winners[0] {
			t.Errorf("a caller got %+v, want the winner's %+v", m, winners[0])
		}
	}
}

func TestMetaSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e, cfg := startTestEtcd(t, dir)
	ctx := context.Background()
	s := NewMetaStore(e.Client(), "")
	want := mustCreateTopic(t, s, "kept")
	mustCreateChannel(t, s, "kept", "ch")
	if err := s.SetChannelPaused(ctx, "kept", "ch", true); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2, err := startEmbedded(cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer e2.Close()
	s2 := NewMetaStore(e2.Client(), "")
	got, ok, err := s2.Topic(ctx, "kept")
	if err != nil || !ok || got != want {
		t.Errorf("after restart Topic = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	channels, err := s2.Channels(ctx, "kept")
	if err != nil || len(channels) != 1 || channels[0].Revision == 0 ||
		!reflect.DeepEqual(channels[0], ChannelMeta{Topic: "kept", Name: "ch", Paused: true, Revision: channels[0].Revision}) {
		t.Errorf("after restart Channels = %+v, %v", channels, err)
	}
}

func TestMetaPrefixesAreSeparate(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	ctx := context.Background()
	tests := []struct{ prefix, key string }{
		{"", "/partita/topics/t"},
		{"/a", "/a/topics/t"},
		{"/b/", "/b/topics/t"},
	}
	for i, tt := range tests {
		s := NewMetaStore(e.Client(), tt.prefix)
		if _, created, err := s.CreateTopic(ctx, "t", int32(i+1), 1); err != nil || !created {
			t.Fatalf("prefix %q: created=%v err=%v", tt.prefix, created, err)
		}
		resp, err := e.Client().Get(ctx, tt.key)
		if err != nil || len(resp.Kvs) != 1 {
			t.Errorf("prefix %q: key %s not written (%v)", tt.prefix, tt.key, err)
		}
	}
	for i, tt := range tests {
		meta, _, err := NewMetaStore(e.Client(), tt.prefix).Topic(ctx, "t")
		if err != nil || meta.Partitions != int32(i+1) {
			t.Errorf("prefix %q sees %+v, %v; want %d partitions", tt.prefix, meta, err, i+1)
		}
	}
}

func TestMetaValuesAreProtobuf(t *testing.T) {
	s, cli := newTestStore(t)
	ctx := context.Background()
	want := mustCreateTopic(t, s, "t")
	resp, err := cli.Get(ctx, DefaultMetaPrefix+"topics/t")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("raw get: %v", err)
	}
	var pb messages.TopicMeta
	if err := proto.Unmarshal(resp.Kvs[0].Value, &pb); err != nil {
		t.Fatalf("stored value is not a messages.TopicMeta: %v", err)
	}
	if pb.GetName() != want.Name || pb.GetPartitions() != want.Partitions || pb.GetCreatedUnixNano() != want.CreatedUnixNano {
		t.Errorf("stored %v, want %+v", &pb, want)
	}

	if _, err := cli.Put(ctx, DefaultMetaPrefix+"topics/broken", "\xff\xff\xff"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Topic(ctx, "broken"); err == nil || !strings.Contains(err.Error(), "decode topic meta") {
		t.Errorf("corrupt value: err = %v, want a decode error", err)
	}
	if _, err := s.Topics(ctx); err == nil {
		t.Error("Topics hid a corrupt value")
	}
}

// receiveUntil receives from ch until what it receives is done.
func receiveUntil[T any](t *testing.T, ch <-chan T, done func(T) bool) T {
	t.Helper()
	for {
		if v := receive(t, ch); done(v) {
			return v
		}
	}
}

// storesBehindProxy starts an etcd and returns a store straight on it and
// a store whose client goes through proxy, to be cut off.
func storesBehindProxy(t *testing.T) (e *Embedded, direct, watched *MetaStore, proxy *flakyProxy) {
	t.Helper()
	e, cfg := startTestEtcd(t, t.TempDir())
	proxy = startFlakyProxy(t, cfg.ClientAddr)
	return e, NewMetaStore(e.Client(), ""), NewMetaStore(newTestClient(t, proxy.ln.Addr().String()), ""), proxy
}

// cutAndCompact cuts the watcher behind proxy off from etcd while change
// runs, and compacts the history the watcher would resume from. A write
// after change moves the compaction past change's last revision, which a
// watch resuming exactly there could still read.
func cutAndCompact(t *testing.T, e *Embedded, proxy *flakyProxy, change func()) {
	t.Helper()
	proxy.cut()
	change()
	resp, err := e.Client().Put(t.Context(), "compact-now", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client().Compact(t.Context(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	proxy.heal()
}

// A deletion made while the watcher is cut off from etcd, with the history
// it would resume from compacted, is still reported, with the deleted
// incarnation, before the topics are listed again; a topic deleted and
// created again meanwhile reports its old incarnation deleted and lists
// its new one, and a topic left alone is only listed again.
func TestWatchTopicsSeesDeletionsMissedWhileCutOff(t *testing.T) {
	e, direct, watched, proxy := storesBehindProxy(t)
	ctx := t.Context()

	gone, again, kept := mustCreateTopic(t, direct, "gone"), mustCreateTopic(t, direct, "again"), mustCreateTopic(t, direct, "kept")
	events := watched.WatchTopics(ctx)
	listed := map[string]int64{}
	for len(listed) < 3 {
		ev := receive(t, events)
		if ev.Deleted {
			t.Fatalf("the first listing reported %s deleted", ev.Topic.Name)
		}
		listed[ev.Topic.Name] = ev.Topic.CreatedUnixNano
	}

	var again2 TopicMeta
	cutAndCompact(t, e, proxy, func() {
		for _, name := range []string{"gone", "again"} {
			if _, err := direct.DeleteTopic(ctx, name); err != nil {
				t.Fatal(err)
			}
		}
		again2 = mustCreateTopic(t, direct, "again")
	})

	deleted, relisted := map[string]int64{}, map[string]int64{}
	for len(relisted) < 2 {
		ev := receive(t, events)
		switch {
		case ev.Deleted && len(relisted) > 0:
			t.Fatalf("%s reported deleted after the listing began", ev.Topic.Name)
		case ev.Deleted:
			deleted[ev.Topic.Name] = ev.Topic.CreatedUnixNano
		default:
			relisted[ev.Topic.Name] = ev.Topic.CreatedUnixNano
		}
	}
	if want := map[string]int64{"gone": gone.CreatedUnixNano, "again": again.CreatedUnixNano}; !maps.Equal(deleted, want) {
		t.Fatalf("deletions after the cut: %v, want %v", deleted, want)
	}
	if want := map[string]int64{"again": again2.CreatedUnixNano, "kept": kept.CreatedUnixNano}; !maps.Equal(relisted, want) {
		t.Fatalf("topics listed after the cut: %v, want %v", relisted, want)
	}
	mustCreateTopic(t, direct, "probe")
	if _, err := direct.DeleteTopic(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	if ev := receiveUntil(t, events, func(ev TopicEvent) bool { return ev.Deleted }); ev.Topic.Name != "probe" {
		t.Fatalf("next deletion is %q, want probe (kept and the new again must not be reported)", ev.Topic.Name)
	}
}

// A channel deleted while the watcher is cut off from etcd, with the
// history it would resume from compacted, is still reported deleted; a
// channel left alone is not.
func TestWatchChannelsSeesDeletionsMissedWhileCutOff(t *testing.T) {
	e, direct, watched, proxy := storesBehindProxy(t)
	ctx := t.Context()

	mustCreateTopic(t, direct, "t")
	mustCreateChannel(t, direct, "t", "gone")
	mustCreateChannel(t, direct, "t", "kept")
	events := watched.WatchChannels(ctx)
	for range 2 {
		if ev := receive(t, events); ev.Deleted {
			t.Fatalf("the first listing reported %s deleted", ev.Channel.Name)
		}
	}
	cutAndCompact(t, e, proxy, func() {
		if _, err := direct.DeleteChannel(ctx, "t", "gone"); err != nil {
			t.Fatal(err)
		}
	})
	nextDeletion := func() ChannelMeta {
		return receiveUntil(t, events, func(ev ChannelEvent) bool { return ev.Deleted }).Channel
	}
	if ch := nextDeletion(); !reflect.DeepEqual(ch, ChannelMeta{Topic: "t", Name: "gone"}) {
		t.Fatalf("deletion after the cut: %+v, want t/gone", ch)
	}
	mustCreateChannel(t, direct, "t", "probe")
	if _, err := direct.DeleteChannel(ctx, "t", "probe"); err != nil {
		t.Fatal(err)
	}
	if ch := nextDeletion(); ch.Name != "probe" {
		t.Fatalf("next deletion is %q, want probe (kept must not be reported)", ch.Name)
	}
}

// youzan's per-topic settings are stored with the topic and changed in
// place; a change to the same values writes nothing, so the topic watch
// hears only real changes.
func TestUpdateTopicSettings(t *testing.T) {
	s, cli := newTestStore(t)
	ctx := context.Background()
	created, _, err := s.CreateTopicMeta(ctx, TopicMeta{Name: "t", Partitions: 2, Replicas: 1,
		Ordered: true, SyncEvery: 7, RetentionDays: 3, DisableChannelAutoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.Topic(ctx, "t"); got != created || got.SyncEvery != 7 || got.RetentionDays != 3 || !got.DisableChannelAutoCreate || !got.Ordered {
		t.Fatalf("stored %+v, created %+v", got, created)
	}

	updated, err := s.UpdateTopic(ctx, "t", func(m *TopicMeta) {
		m.SyncEvery, m.RetentionDays, m.DisableChannelAutoCreate = 1, 0, false
		m.CreatedUnixNano = 1 // not the caller's to change
	})
	if err != nil {
		t.Fatal(err)
	}
	want := created
	want.SyncEvery, want.RetentionDays, want.DisableChannelAutoCreate = 1, 0, false
	if updated != want {
		t.Fatalf("UpdateTopic returned %+v, want %+v", updated, want)
	}
	if got, _, _ := s.Topic(ctx, "t"); got != want {
		t.Fatalf("stored %+v, want %+v", got, want)
	}

	before, err := cli.Get(ctx, s.topicKey("t"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateTopic(ctx, "t", func(m *TopicMeta) { m.SyncEvery = 1 }); err != nil {
		t.Fatal(err)
	}
	after, err := cli.Get(ctx, s.topicKey("t"))
	if err != nil {
		t.Fatal(err)
	}
	if before.Kvs[0].ModRevision != after.Kvs[0].ModRevision {
		t.Errorf("an update to the same values rewrote the key (revision %d → %d)", before.Kvs[0].ModRevision, after.Kvs[0].ModRevision)
	}

	if _, err := s.UpdateTopic(ctx, "missing", func(*TopicMeta) {}); !errors.Is(err, ErrTopicNotFound) {
		t.Errorf("update of a missing topic: err = %v, want ErrTopicNotFound", err)
	}
}

// A channel's rate limit and client limits are stored with it: a client
// limit per prefix, replaced by a new one for the same prefix and removed
// by a negative ready, kept sorted by prefix.
func TestChannelLimitsAreStored(t *testing.T) {
	s, _ := newTestStore(t)
	ctx := context.Background()
	mustCreateTopic(t, s, "t")
	mustCreateChannel(t, s, "t", "c")
	if err := s.SetChannelRateLimit(ctx, "t", "c", 300); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		prefix string
		ready  int64
		want   []ClientLimit
	}{
		{"web-", 5, []ClientLimit{{"web-", 5}}},
		{"10.0.", 0, []ClientLimit{{"10.0.", 0}, {"web-", 5}}},
		{"web-", 2, []ClientLimit{{"10.0.", 0}, {"web-", 2}}},
		{"10.0.", -1, []ClientLimit{{"web-", 2}}},
		{"none", -1, []ClientLimit{{"web-", 2}}},
	}
	for _, st := range steps {
		got, err := s.SetChannelClientLimit(ctx, "t", "c", st.prefix, st.ready)
		if err != nil {
			t.Fatal(err)
		}
		channels, _ := s.Channels(ctx, "t")
		if !slices.Equal(got, st.want) || len(channels) != 1 || !slices.Equal(channels[0].ClientLimits, st.want) {
			t.Fatalf("after %q=%d: returned %v, stored %+v, want %v", st.prefix, st.ready, got, channels, st.want)
		}
		if channels[0].RateLimitKB != 300 {
			t.Fatalf("the rate limit went: %+v", channels[0])
		}
	}
	if _, err := s.SetChannelClientLimit(ctx, "t", "missing", "p", 1); !errors.Is(err, ErrChannelNotFound) {
		t.Errorf("limit of a missing channel: err = %v, want ErrChannelNotFound", err)
	}
}
