package topic_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// A failing disk write answers the publisher with a local error and turns
// the node's health to failing (nsqd's /ping NOK), as TestHealth asserts.
func TestDiskWriteFailureReportsHealth(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	store, _, err := storage.OpenPartition(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	health := make(chan error, 4)
	pid := system.Root.Spawn(topic.Props(topic.Options{
		Topic: "t", Store: store, Logger: slog.New(slog.DiscardHandler),
		OnDiskHealth: func(err error) { health <- err },
	}))
	publish := func() topic.Reply { return publishWait(t, system, pid, []byte("x")) }
	if r := publish(); r.Err != nil {
		t.Fatal(r.Err)
	}
	select {
	case err := <-health:
		t.Fatalf("health changed on a working disk: %v", err)
	default:
	}
	store.Log.Close() // every later write fails, as on a dead disk
	r := publish()
	if r.Err == nil || !r.Err.Local || r.Err.Code != "E_PUB_FAILED" {
		t.Fatalf("reply %+v, want a local E_PUB_FAILED", r)
	}
	select {
	case err := <-health:
		if err == nil {
			t.Fatal("health reported working")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("disk failure not reported")
	}
}

// The channels a partition is started with are open before it reads its
// first publish: a second channel, which would start at the end if opened
// after, holds a message published the moment the actor started.
func TestChannelsOpenBeforeTheFirstPublish(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	store, _, err := storage.OpenPartition(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := system.Root.Spawn(topic.Props(topic.Options{
		Topic: "t", Store: store, Logger: slog.New(slog.DiscardHandler), Channels: []string{"first", "second"},
	}))
	if r := publishWait(t, system, pid, []byte("x")); r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, name := range []string{"first", "second"} {
		res, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: name}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		snap, err := system.Root.RequestFuture(res.(*topic.ChannelReady).PID, &channel.StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if st := snap.(*channel.Snapshot).Stats; st.Depth != 1 {
			t.Fatalf("channel %s: %+v, want the message published at start waiting", name, st)
		}
	}
}

// publishWait publishes bodies to the partition actor pid and returns its
// reply, failing the test when none comes within 5 s.
func publishWait(t *testing.T, system *actor.ActorSystem, pid *actor.PID, bodies ...[]byte) topic.Reply {
	t.Helper()
	done := make(chan topic.Reply, 1)
	system.Root.Send(pid, &topic.Published{Bodies: bodies, Reply: func(r topic.Reply) { done <- r }})
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
		return topic.Reply{}
	}
}

// A channel deleted and asked for again at once (an ephemeral channel's
// last consumer leaving as another subscribes, a channel deleted and
// created again) is a new channel: the partition answers once the deleted
// one's actor has stopped, which still held the name and its saved state,
// and the new one starts at the end, as a topic's channel made after all
// were deleted does. It was refused nearly every time.
func TestChannelDeletedAndWantedAgainAtOnceIsNew(t *testing.T) {
	system, pid := channelCWithThree(t)
	depth := func(round int) int64 {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		ch := res.(*topic.ChannelReady).PID
		if ch == nil {
			t.Fatalf("round %d: channel refused", round)
		}
		snap, err := system.Root.RequestFuture(ch, &channel.StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		return snap.(*channel.Snapshot).Stats.Depth
	}
	if d := depth(0); d != 3 {
		t.Fatalf("the first channel holds %d messages, want the 3 published", d)
	}
	for round := 1; round <= 100; round++ {
		system.Root.Send(pid, &topic.ChannelDeleted{Name: "c"})
		if d := depth(round); d != 0 {
			t.Fatalf("round %d: the channel made again holds %d messages, want none", round, d)
		}
	}
	// Deleted and not asked for again, it stays gone once its actor stopped.
	res, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	system.Root.Send(pid, &topic.ChannelDeleted{Name: "c"})
	if err := system.Root.StopFuture(res.(*topic.ChannelReady).PID).Wait(); err != nil {
		t.Fatal(err)
	}
	st, err := system.Root.RequestFuture(pid, &topic.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.(*topic.Stats).ChannelActors); n != 0 {
		t.Fatalf("%d channels after the deletion, want none", n)
	}

	// Deleted, asked for, and deleted again: the asker gets none if the
	// first deletion was not over when it asked, or the channel made
	// again, which the second deletion removes. Either way none is left.
	if depth(101) != 0 {
		t.Fatal("the channel made again holds messages")
	}
	system.Root.Send(pid, &topic.ChannelDeleted{Name: "c"})
	asked := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second)
	system.Root.Send(pid, &topic.ChannelDeleted{Name: "c"})
	if _, err = asked.Result(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := system.Root.RequestFuture(pid, &topic.StatsRequested{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		n := len(st.(*topic.Stats).ChannelActors)
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d channels after a deletion, a request and a second deletion, want none", n)
		}
		<-time.After(10 * time.Millisecond)
	}
}

// A channel actor that stopped before its partition took the deletion
// queued for it (the stop, a system message, overtakes it) is forgotten,
// and the deletion still removes its saved state: the channel asked for
// again is new, at the end, and not the dead actor or one resumed from the
// deleted channel's offsets.
func TestChannelStoppedBeforeItsDeletionIsDeletedAndMadeNew(t *testing.T) {
	system, pid := channelCWithThree(t)
	wanted := func() *actor.PID {
		t.Helper()
		res, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*topic.ChannelReady).PID
	}
	old := wanted()
	if err := system.Root.StopFuture(old).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the partition to forget the stopped channel", func() bool {
		st, err := system.Root.RequestFuture(pid, &topic.StatsRequested{}, 5*time.Second).Result()
		return err == nil && len(st.(*topic.Stats).ChannelActors) == 0
	})
	system.Root.Send(pid, &topic.ChannelDeleted{Name: "c"})
	ch := wanted()
	if ch == nil {
		t.Fatal("asked for after the deletion, got none, want a new channel")
	}
	// A new actor under the same name answers; the stopped one could not.
	snap, err := system.Root.RequestFuture(ch, &channel.StatsRequested{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := snap.(*channel.Snapshot).Stats.Depth; d != 0 {
		t.Fatalf("the channel made after the deletion holds %d messages, want none", d)
	}
}

// channelCWithThree starts a partition on disk with channel c, holding
// three published messages.
func channelCWithThree(t *testing.T) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	t.Cleanup(system.Shutdown)
	dir := t.TempDir()
	store, _, err := storage.OpenPartition(dir, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := system.Root.Spawn(topic.Props(topic.Options{
		Topic: "t", Dir: dir, Store: store, Logger: slog.New(slog.DiscardHandler), Channels: []string{"c"},
	}))
	for range 3 {
		if r := publishWait(t, system, pid, []byte("x")); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	return system, pid
}
