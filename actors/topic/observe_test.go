package topic_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

type recordingObserver struct {
	mu                 sync.Mutex
	commits, leaderOf  int
	committedMessages  int
	negativeLatencies  int
	instrumentedByKind map[string]int
	catchUpChunks      int
	catchUpRecords     int
	catchUpBytes       int
}

func (o *recordingObserver) Committed(_ string, _ int32, msgs int, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.commits++
	o.committedMessages += msgs
	if d < 0 {
		o.negativeLatencies++
	}
}
func (o *recordingObserver) ReplicaAcked(string, int32, string, time.Duration) {}
func (o *recordingObserver) ISRShrunk(string, int32, int)                      {}
func (o *recordingObserver) ISRExpanded(string, int32, string)                 {}
func (o *recordingObserver) BecameLeader(string, int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leaderOf++
}
func (o *recordingObserver) CatchUpSent(_ string, _ int32, _ string, records, bytes int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.catchUpChunks++
	o.catchUpRecords += records
	o.catchUpBytes += bytes
}
func (o *recordingObserver) FrameSent(string, int) {}

// A single-node partition reports taking its leadership once and every
// commit with its message count; its channels get the configured props.
func TestObserverHearsCommitsAndLeadership(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	store, _, err := storage.OpenPartition(t.TempDir(), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obs := &recordingObserver{instrumentedByKind: map[string]int{}}
	pid := system.Root.Spawn(topic.Props(topic.Options{
		Topic: "t", Store: store, Logger: slog.New(slog.DiscardHandler), Observer: obs,
		ActorProps: func(kind string) []actor.PropsOption {
			obs.mu.Lock()
			obs.instrumentedByKind[kind]++
			obs.mu.Unlock()
			return nil
		},
	}))
	for _, bodies := range [][][]byte{{[]byte("a")}, {[]byte("b"), []byte("c")}} {
		if r := publishWait(t, system, pid, bodies...); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if _, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "c"}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.leaderOf != 1 || obs.commits != 2 || obs.committedMessages != 3 || obs.negativeLatencies != 0 {
		t.Fatalf("observed leadership %d, commits %d of %d messages (%d negative latencies); want 1, 2, 3, 0",
			obs.leaderOf, obs.commits, obs.committedMessages, obs.negativeLatencies)
	}
	if obs.instrumentedByKind["channel"] != 1 {
		t.Fatalf("props instrumented %v, want one channel", obs.instrumentedByKind)
	}
}

// A wiped follower's catch-up is reported chunk by chunk as it goes, the
// chunks adding up to every record of the leader's log and its bytes.
func TestCatchUpReportedChunkByChunk(t *testing.T) {
	var size int64
	obs := &recordingObserver{instrumentedByKind: map[string]int{}}
	c := newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < 1000; i++ { // four chunks of at most 256 records
			history(t, store, 1, "m")
		}
		size = store.Log.End()
	}, func(node string, o *topic.Options) {
		if node == "n1" {
			o.Observer = obs
		}
	})
	if r := c.publish("new"); r.Err != nil { // waits for n3, which is in the ISR
		t.Fatal(r.Err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.catchUpChunks != 4 || obs.catchUpRecords != 1000 || int64(obs.catchUpBytes) != size {
		t.Fatalf("catch-up reported in %d chunks, %d records, %d bytes; want 4, 1000, %d", obs.catchUpChunks, obs.catchUpRecords, obs.catchUpBytes, size)
	}
}
