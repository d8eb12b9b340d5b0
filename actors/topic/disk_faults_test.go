package topic_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/faultfs"
	"github.com/partitamq/partita/storage"
)

// faultyPartition runs a partition actor over a fault-injecting disk.
type faultyPartition struct {
	t      *testing.T
	system *actor.ActorSystem
	pid    *actor.PID
	fs     *faultfs.FS
	dir    string
	health chan error
}

func startFaulty(t *testing.T, syncEvery int, opts ...func(*topic.Options)) *faultyPartition {
	t.Helper()
	f := &faultyPartition{t: t, fs: faultfs.New(), dir: t.TempDir(), health: make(chan error, 100)}
	f.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	store, _, err := storage.OpenPartition(f.dir, storage.Options{SyncEvery: syncEvery, SyncTimeout: 20 * time.Millisecond, FS: f.fs})
	if err != nil {
		t.Fatal(err)
	}
	o := topic.Options{
		Topic: "t", Store: store, Logger: slog.New(slog.DiscardHandler), SyncTimeout: 20 * time.Millisecond,
		OnDiskHealth: func(err error) { f.health <- err },
	}
	for _, opt := range opts {
		opt(&o)
	}
	f.pid = f.system.Root.Spawn(topic.Props(o))
	return f
}

func (f *faultyPartition) publish(body string) topic.Reply {
	f.t.Helper()
	done := make(chan topic.Reply, 1)
	f.system.Root.Send(f.pid, &topic.Published{Bodies: [][]byte{[]byte(body)}, Reply: func(r topic.Reply) { done <- r }})
	select {
	case r := <-done:
		return r
	case <-time.After(10 * time.Second):
		f.t.Fatal("no reply within 10s")
		return topic.Reply{}
	}
}

// waitHealth waits for the health report to become failing (true) or
// working (false).
func (f *faultyPartition) waitHealth(failing bool) {
	f.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case err := <-f.health:
			if (err != nil) == failing {
				return
			}
		case <-deadline:
			f.t.Fatalf("disk health never became failing=%v", failing)
		}
	}
}

// stop ends the actor (which closes the store) and lists what the real
// disk holds committed.
func (f *faultyPartition) stop() []string {
	f.t.Helper()
	f.fs.Heal()
	if err := f.system.Root.StopFuture(f.pid).Wait(); err != nil {
		f.t.Fatal(err)
	}
	f.system.Shutdown()
	p, _, err := storage.OpenPartition(f.dir, storage.Options{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer p.Close()
	var out []string
	end, _ := p.Committed()
	for off := int64(0); off < end; {
		msgs, next, err := p.Log.ReadMessages(off, end, make([]byte, 4096))
		if err != nil {
			f.t.Fatal(err)
		}
		for _, m := range msgs {
			out = append(out, string(m.Body))
		}
		off = next
	}
	return out
}

// Fsync errors: every publish is refused with the local E_PUB_FAILED and
// the disk reported failing (/ping NOK) while they last; the partition
// takes publishes again once they clear; the disk holds exactly the
// acknowledged messages.
func TestFsyncErrorsRefusePublishesUntilHealed(t *testing.T) {
	for _, syncEvery := range []int{1, 1000} {
		t.Run(fmt.Sprint("sync-every ", syncEvery), func(t *testing.T) {
			f := startFaulty(t, syncEvery)
			var acked []string
			pub := func(body string) topic.Reply {
				r := f.publish(body)
				if r.Err == nil {
					acked = append(acked, body)
				}
				return r
			}
			if r := pub("before"); r.Err != nil {
				t.Fatal(r.Err)
			}
			f.fs.FailSync(nil)
			if syncEvery > 1 {
				// Only the periodic fsync meets the fault.
				f.waitHealth(true)
			}
			for i := range 3 {
				r := pub(fmt.Sprint("during-", i))
				if r.Err == nil || r.Err.Code != "E_PUB_FAILED" || !r.Err.Local || !strings.Contains(r.Err.Text, "fsync") {
					t.Fatalf("publish while fsync fails: %+v, want a local E_PUB_FAILED naming the fsync", r.Err)
				}
			}
			if syncEvery == 1 {
				f.waitHealth(true)
			}
			f.fs.Heal()
			if r := pub("after"); r.Err != nil {
				t.Fatalf("publish after the fault cleared: %v", r.Err)
			}
			f.waitHealth(false)
			if got := f.stop(); fmt.Sprint(got) != fmt.Sprint(acked) {
				t.Fatalf("disk holds %q, acknowledged were %q", got, acked)
			}
		})
	}
}

// A full disk refuses publishes with E_PUB_FAILED naming ENOSPC and takes
// them again once space is freed, keeping every acknowledged message.
func TestFullDiskRefusesPublishesUntilSpaceFreed(t *testing.T) {
	f := startFaulty(t, 1)
	var acked []string
	for i := range 2 {
		body := fmt.Sprint("before-", i)
		if r := f.publish(body); r.Err != nil {
			t.Fatal(r.Err)
		}
		acked = append(acked, body)
	}
	f.fs.Fill(10)
	for i := range 3 {
		r := f.publish(fmt.Sprint("full-", i))
		if r.Err == nil || r.Err.Code != "E_PUB_FAILED" || !strings.Contains(r.Err.Text, "no space left") {
			t.Fatalf("publish on a full disk: %+v, want E_PUB_FAILED ... no space left on device", r.Err)
		}
	}
	f.waitHealth(true)
	f.fs.Heal()
	if r := f.publish("after"); r.Err != nil {
		t.Fatalf("publish after space was freed: %v", r.Err)
	}
	acked = append(acked, "after")
	f.waitHealth(false)
	if got := f.stop(); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("disk holds %q, acknowledged were %q", got, acked)
	}
}

// A failing fsync is retried while it fails, paced rather than at once
// after each failure.
func TestFailingFsyncRetriedAtAPace(t *testing.T) {
	f := startFaulty(t, 1000)
	if r := f.publish("a"); r.Err != nil {
		t.Fatal(r.Err)
	}
	f.fs.FailSync(nil)
	f.waitHealth(true)
	before := f.fs.Syncs()
	time.Sleep(200 * time.Millisecond)
	// --sync-timeout is 20ms: retries every 10ms at most.
	if n := f.fs.Syncs() - before; n < 2 || n > 60 {
		t.Fatalf("%d fsyncs attempted in 200ms while failing, want a retry every 10ms or so", n)
	}
	f.fs.Heal()
	if r := f.publish("b"); r.Err != nil {
		t.Fatalf("publish after the fault cleared: %v", r.Err)
	}
	if got := f.stop(); fmt.Sprint(got) != "[a b]" {
		t.Fatalf("disk holds %q", got)
	}
}
