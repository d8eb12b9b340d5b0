package topic_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
	publish := func() topic.Reply {
		done := make(chan topic.Reply, 1)
		system.Root.Send(pid, &topic.Published{Bodies: [][]byte{[]byte("x")}, Reply: func(r topic.Reply) { done <- r }})
		select {
		case r := <-done:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no reply")
			return topic.Reply{}
		}
	}
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
