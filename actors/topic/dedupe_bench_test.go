package topic_test

import (
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// BenchmarkPublishDedupe publishes 200-byte messages to one partition
// actor from eight concurrent publishers, each waiting for its answer, in
// batches of 1 and 200, as:
//   - plain: no header, no window;
//   - headers: each message with a {"##msg_id":…} header, no window (what
//     a producer that names its messages pays without dedupe);
//   - dedupe: the same headers and IDs, with a window: every ID is new,
//     so each message costs a lookup and an entry; the window holds the
//     default 100,000 IDs once the benchmark has run a while;
//   - dedupe10k: the same with --dedupe-max-entries 10000, whose index
//     stays in the processor's caches.
//
// It reports messages per second; dedupe against headers is the cost of
// idempotence.
func BenchmarkPublishDedupe(b *testing.B) {
	for _, batch := range []int{1, 200} {
		for _, mode := range []string{"plain", "headers", "dedupe", "dedupe10k"} {
			b.Run(fmt.Sprintf("batch=%d/%s", batch, mode), func(b *testing.B) {
				system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
				defer system.Shutdown()
				store, _, err := storage.OpenPartition(b.TempDir(), storage.Options{})
				if err != nil {
					b.Fatal(err)
				}
				opt := topic.Options{
					Topic: "bench", Store: store, Logger: slog.New(slog.DiscardHandler),
					Writer: topic.WriterConfig{Replicas: 1, Window: 16, MaxBatchMessages: 1000},
				}
				switch mode {
				case "dedupe":
					opt.Dedupe = topic.DedupeConfig{Window: time.Minute}
				case "dedupe10k":
					opt.Dedupe = topic.DedupeConfig{Window: time.Minute, MaxEntries: 10_000}
				}
				pid := system.Root.Spawn(topic.Props(opt))
				defer func() { system.Root.PoisonFuture(pid).Wait() }()
				b.ReportMetric(publishNamed(b, system, pid, batch, mode), "msgs/s")
			})
		}
	}
}

// publishNamed publishes b.N batches from eight publishers, each message
// named by a new ID unless mode is plain, and returns messages per second.
func publishNamed(b *testing.B, system *actor.ActorSystem, pid *actor.PID, batch int, mode string) float64 {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for p := range 8 {
		wg.Go(func() { publishBatches(b, system, pid, &next, strconv.Itoa(p)+"-", batch, mode) })
	}
	wg.Wait()
	rate := float64(b.N*batch) / time.Since(start).Seconds()
	b.StopTimer()
	return rate
}

// publishBatches publishes batches until b.N are taken, waiting for each
// answer; the IDs start with prefix.
func publishBatches(b *testing.B, system *actor.ActorSystem, pid *actor.PID, next *atomic.Int64, prefix string, batch int, mode string) {
	body := make([]byte, 200)
	done := make(chan topic.Reply, 1)
	seq := 0
	for next.Add(1) <= int64(b.N) {
		m := &topic.Published{Bodies: make([][]byte, batch), Reply: func(r topic.Reply) { done <- r }}
		if mode != "plain" {
			m.Headers = make([][]byte, batch)
		}
		if mode == "dedupe" || mode == "dedupe10k" {
			m.IDs = make([]string, batch)
		}
		for i := range batch {
			m.Bodies[i] = body
			if mode == "plain" {
				continue
			}
			seq++
			id := prefix + strconv.Itoa(seq)
			m.Headers[i] = []byte(`{"##msg_id":"` + id + `"}`)
			if m.IDs != nil {
				m.IDs[i] = id
			}
		}
		system.Root.Send(pid, m)
		if r := <-done; r.Err != nil {
			b.Error(r.Err)
			return
		}
	}
}
