package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/replication"
	"github.com/partitamq/partita/storage"
)

const leaderNode = "n1"

var followerNodes = []string{"n2", "n3"}

// replicatedPartition is one leader partition actor and its two followers,
// each over its own log on disk, in one actor system. shutdown undoes
// everything the constructor started, in reverse.
type replicatedPartition struct {
	system    *actor.ActorSystem
	leader    *actor.PID
	nodes     map[string]*actor.PID // the partition actor of each node
	props     func(kind string) []actor.PropsOption
	shutdowns []func()
}

// linker connects the leader to its followers; it may add shutdowns of its
// own to rp.
type linker func(b *testing.B, rp *replicatedPartition, followers map[string]*actor.PID) replica.Dialer

// newReplicatedPartition starts the followers, links them to the leader,
// then starts the leader. If it fails half way, it undoes what it started.
func newReplicatedPartition(b *testing.B, link linker) *replicatedPartition {
	b.Helper()
	props, stopWorkers := actorProps()
	rp := &replicatedPartition{system: newSystem(), nodes: map[string]*actor.PID{}, props: props}
	rp.shutdowns = append(rp.shutdowns, stopWorkers, rp.system.Shutdown)
	started := false
	defer func() {
		if !started {
			rp.shutdown()
		}
	}()
	followers := map[string]*actor.PID{}
	for _, n := range followerNodes {
		followers[n] = rp.spawn(b, n, nil)
	}
	rp.leader = rp.spawn(b, leaderNode, link(b, rp, followers))
	started = true
	return rp
}

func (rp *replicatedPartition) spawn(b *testing.B, node string, dial replica.Dialer) *actor.PID {
	b.Helper()
	store, _, err := storage.OpenPartition(b.TempDir(), storage.Options{})
	if err != nil {
		b.Fatal(err)
	}
	pid := rp.system.Root.Spawn(topic.Props(topic.Options{
		ActorProps: rp.props,
		Topic:      "bench",
		Store:      store,
		Writer:     topic.WriterConfig{Window: 16, MaxBatchMessages: 1000, ShrinkAfter: time.Second, WriteTimeout: 5 * time.Second},
		Logger:     slog.New(slog.DiscardHandler),
		Node:       node,
		Role:       topic.Role{Leader: leaderNode, ISR: append([]string{leaderNode}, followerNodes...), EpochForWrite: 1, Replicas: 3},
		Dial:       dial,
		// A follower too slow for a benchmark should fail it, not quietly
		// turn it into a benchmark of a smaller ISR.
		ShrinkISR: func(_ context.Context, remove []string) (topic.Role, error) {
			b.Errorf("followers %v fell behind and would leave the ISR", remove)
			return topic.Role{}, errors.New("benchmark keeps its ISR")
		},
	}).Configure(rp.props("partition")...))
	rp.nodes[node] = pid
	rp.shutdowns = append(rp.shutdowns, func() { rp.system.Root.PoisonFuture(pid).Wait() })
	return pid
}

// shutdown stops the leader first, so its streams close before the
// followers and servers behind them go away.
func (rp *replicatedPartition) shutdown() {
	for i := len(rp.shutdowns) - 1; i >= 0; i-- {
		rp.shutdowns[i]()
	}
}

// inmemDialer links the leader to follower actors in the same system.
func inmemDialer(_ *testing.B, rp *replicatedPartition, followers map[string]*actor.PID) replica.Dialer {
	return func(_ context.Context, node string, onFrame func(*messages.FollowerFrame, bool), _ func(error)) (replica.Link, error) {
		to, ok := followers[node]
		if !ok {
			return nil, fmt.Errorf("no follower %s", node)
		}
		return &inmemLink{root: rp.system.Root, to: to, onFrame: onFrame}, nil
	}
}

// inmemLink hands the leader's writes straight to a follower actor and its
// acks straight back: replication without a socket.
type inmemLink struct {
	root    *actor.RootContext
	to      *actor.PID
	onFrame func(*messages.FollowerFrame, bool)
	closed  atomic.Bool
}

func (l *inmemLink) Send(f *messages.LeaderFrame) error {
	if l.closed.Load() {
		return errors.New("link closed")
	}
	if ws := f.GetWrites().GetWrites(); len(ws) > 0 {
		l.root.Send(l.to, &topic.ReplicaWritesArrived{Writes: ws, Reply: l.acks})
	}
	return nil
}

func (l *inmemLink) acks(acks []*messages.ReplicaAck) {
	if !l.closed.Load() {
		l.onFrame(&messages.FollowerFrame{Body: &messages.FollowerFrame_Acks{Acks: &messages.ReplicaAcks{Acks: acks}}}, false)
	}
}

func (l *inmemLink) Close() { l.closed.Store(true) }

func (l *inmemLink) TakesFrames() bool { return true }

// tcpDialer puts each follower behind a replication.Server on loopback and
// opens the leader's streams to it, one TCP connection each, as nodes do.
func tcpDialer(b *testing.B, rp *replicatedPartition, followers map[string]*actor.PID) replica.Dialer {
	conns := map[string]*replication.Conn{}
	for node, pid := range followers {
		conns[node] = serveFollower(b, rp, node, pid)
	}
	opt := replication.Options{NodeID: leaderNode}
	return func(ctx context.Context, node string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) (replica.Link, error) {
		conn, ok := conns[node]
		if !ok {
			return nil, fmt.Errorf("no follower %s", node)
		}
		return replication.Open(ctx, conn, opt, onFrame, onDown)
	}
}

func serveFollower(b *testing.B, rp *replicatedPartition, node string, pid *actor.PID) *replication.Conn {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := replication.NewServer(followerApplier{root: rp.system.Root, to: pid}, replication.Options{NodeID: node})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	rp.shutdowns = append(rp.shutdowns, func() {
		srv.Stop()
		if err := <-served; err != nil {
			b.Errorf("replication server of %s: %v", node, err)
		}
	})
	conn, err := replication.Dial(ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	rp.shutdowns = append(rp.shutdowns, func() { conn.Close() })
	return conn
}

// followerApplier is a follower node's side of the stream, cut down to the
// one partition it holds, as the broker's is.
type followerApplier struct {
	root *actor.RootContext
	to   *actor.PID
}

func (a followerApplier) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	a.root.Send(a.to, &topic.ReplicaWriteArrived{Write: w, Reply: reply})
}

func (a followerApplier) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	a.root.Send(a.to, &topic.ReplicaWritesArrived{Writes: ws, Reply: reply})
}

func (a followerApplier) ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck)) {
	a.root.Send(a.to, &topic.OffsetArrived{Update: u, Reply: reply})
}

// BenchmarkReplicatedAppend is BenchmarkPartitionAppend with replication
// factor 3: a publish is answered once the leader and both followers have
// it. transport=inmem hands writes between actors directly, so it measures
// the write flow alone; transport=tcp sends them through real replication
// streams on loopback.
func BenchmarkReplicatedAppend(b *testing.B) {
	transports := []struct {
		name string
		link linker
	}{
		{"inmem", inmemDialer},
		{"tcp", tcpDialer},
	}
	for _, tr := range transports {
		for _, batch := range []int{1, 200} {
			b.Run(fmt.Sprintf("transport=%s/batch=%d", tr.name, batch), func(b *testing.B) {
				defer expectGoroutines(b, runtime.NumGoroutine())
				rp := newReplicatedPartition(b, tr.link)
				defer rp.shutdown()
				rate := publishFromEight(b, rp.system, rp.leader, batch)
				// The store belongs to the actor's goroutine: ask the actor.
				for node, pid := range rp.nodes {
					res, err := rp.system.Root.RequestFuture(pid, &topic.StatsRequested{}, 5*time.Second).Result()
					if err != nil {
						b.Fatal(err)
					}
					if count := res.(*topic.Stats).Committed; count != int64(b.N*batch) {
						b.Errorf("%s committed %d messages, want %d", node, count, b.N*batch)
					}
				}
				b.ReportMetric(rate, "msgs/s")
			})
		}
	}
}

// publishFromEight runs b.N publishes of batch 200-byte messages from 8
// concurrent publishers, each waiting for its answer, and returns messages
// per second.
func publishFromEight(b *testing.B, system *actor.ActorSystem, pid *actor.PID, batch int) float64 {
	bodies := make([][]byte, batch)
	for i := range bodies {
		bodies[i] = make([]byte, 200)
	}
	const publishers = 8
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for p := 0; p < publishers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done := make(chan topic.Reply, 1)
			for next.Add(1) <= int64(b.N) {
				system.Root.Send(pid, &topic.Published{Bodies: bodies, Reply: func(r topic.Reply) { done <- r }})
				if r := <-done; r.Err != nil {
					b.Error(r.Err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return float64(b.N*batch) / elapsed.Seconds()
}

// expectGoroutines fails the benchmark if goroutines it started outlive it,
// so one sub-benchmark's streams and actors cannot slow the next.
func expectGoroutines(b *testing.B, before int) {
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for runtime.NumGoroutine() > before {
		select {
		case <-tick.C:
		case <-deadline:
			buf := make([]byte, 1<<20)
			b.Errorf("%d goroutines before, %d after shutdown:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
			return
		}
	}
}
