// Package benchmarks measures Partita's actors in-process (this file) and
// the whole node against nsqd (e2e/, a module of its own).
package benchmarks

import (
	"flag"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

var dispatcher = flag.String("dispatcher", "workers", "actor dispatcher: workers (package dispatch, as the node runs) or default (protoactor's goroutine per mailbox run)")

// actorProps puts a benchmark's actors on the dispatcher -dispatcher
// names; stop ends its goroutines once the actors are stopped.
func actorProps() (props func(kind string) []actor.PropsOption, stop func()) {
	if *dispatcher == "default" {
		return func(string) []actor.PropsOption { return nil }, func() {}
	}
	w := dispatch.New(300, 4*runtime.GOMAXPROCS(0))
	return func(string) []actor.PropsOption { return []actor.PropsOption{actor.WithDispatcher(w)} }, w.Stop
}

func newSystem() *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
}

func startPartition(b *testing.B, system *actor.ActorSystem) *actor.PID {
	b.Helper()
	store, _, err := storage.OpenPartition(b.TempDir(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	props, stop := actorProps()
	b.Cleanup(stop)
	pid := system.Root.Spawn(topic.Props(topic.Options{
		ActorProps: props,
		Topic:      "bench",
		Store:      store,
		Writer:     topic.WriterConfig{Replicas: 1, Window: 16, MaxBatchMessages: 1000},
		Logger:     slog.New(slog.DiscardHandler),
	}).Configure(props("partition")...))
	b.Cleanup(func() { system.Root.PoisonFuture(pid).Wait() })
	return pid
}

// BenchmarkPartitionAppend publishes 200-byte messages to one partition
// actor from several concurrent publishers, as sessions do, each waiting for
// its answer before the next publish. It reports messages per second.
func BenchmarkPartitionAppend(b *testing.B) {
	for _, batch := range []int{1, 200} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			system := newSystem()
			defer system.Shutdown()
			pid := startPartition(b, system)
			rate := publishFromEight(b, system, pid, batch)
			b.ReportMetric(rate, "msgs/s")
		})
	}
}

// finisher is a consumer that FINs every message as soon as it arrives.
type finisher struct {
	system *actor.ActorSystem
	pid    atomic.Pointer[actor.PID]
	id     int64
	got    atomic.Int64
	done   chan struct{}
	want   int64
}

func (f *finisher) Deliver(_ string, _ int32, ds []channel.Delivery) {
	for _, d := range ds {
		f.system.Root.Send(f.pid.Load(), &channel.Finished{ConsumerID: f.id, ID: d.ID})
	}
	if f.got.Add(int64(len(ds))) == f.want {
		close(f.done)
	}
}
func (f *finisher) Refused(string, uint64, error) {}
func (f *finisher) ChannelGone()                  {}

// BenchmarkChannelDelivery measures a channel actor handing out a backlog of
// 200-byte messages read from the partition log, with RDY 2500 and every
// message FINished, as bench_reader does.
func BenchmarkChannelDelivery(b *testing.B) {
	system := newSystem()
	defer system.Shutdown()
	pid := startPartition(b, system)
	bodies := make([][]byte, 1000)
	for i := range bodies {
		bodies[i] = make([]byte, 200)
	}
	for n := 0; n < b.N; n += len(bodies) {
		done := make(chan topic.Reply, 1)
		chunk := bodies[:min(len(bodies), b.N-n)]
		system.Root.Send(pid, &topic.Published{Bodies: chunk, Reply: func(r topic.Reply) { done <- r }})
		if r := <-done; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
	f := &finisher{system: system, id: 1, done: make(chan struct{}), want: int64(b.N)}
	cons := &channel.Consumer{ID: 1, MsgTimeout: time.Minute, Out: f}
	b.ResetTimer()
	start := time.Now()
	res, err := system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: "ch"}, 5*time.Second).Result()
	if err != nil {
		b.Fatal(err)
	}
	ch := res.(*topic.ChannelReady).PID
	f.pid.Store(ch)
	cons.SetChannels([]*actor.PID{ch})
	cons.SetRDY(2500)
	system.Root.Send(ch, &channel.Subscribed{Consumer: cons})
	<-f.done
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
}
