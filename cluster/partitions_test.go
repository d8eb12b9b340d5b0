package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const waitTimeout = 10 * time.Second

func newTestAssignments(t *testing.T) (*Assignments, *clientv3.Client, EtcdConfig) {
	t.Helper()
	e, cfg := startTestEtcd(t, t.TempDir())
	return NewAssignments(e.Client(), ""), e.Client(), cfg
}

func newTestClient(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + addr},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func mustCreatePartition(t *testing.T, a *Assignments, st PartitionState) PartitionState {
	t.Helper()
	stored, _, err := a.Create(context.Background(), st)
	if err != nil {
		t.Fatalf("create %s/%d: %v", st.Topic, st.Partition, err)
	}
	return stored
}

// receive returns the next value from ch, failing the test if none comes
// within waitTimeout or ch is closed.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("channel closed")
		}
		return v
	case <-time.After(waitTimeout):
		t.Fatal("nothing received")
	}
	panic("unreachable")
}

// oneByOne hands on the states of a watch's batches one at a time, and
// closes when the watch does.
func oneByOne(t *testing.T, batches <-chan []PartitionState) <-chan PartitionState {
	out := make(chan PartitionState)
	go func() {
		defer close(out)
		for batch := range batches {
			for _, st := range batch {
				select {
				case out <- st:
				case <-t.Context().Done(): // the test stopped reading
					return
				}
			}
		}
	}()
	return out
}

func expectClosed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("channel not closed")
		}
	}
}

func samePartition(t *testing.T, what string, got, want PartitionState) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func TestCreatePartitionIsIdempotent(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	st := PartitionState{Topic: "orders", Partition: 3, Leader: "n1", ISR: []string{"n1", "n2"},
		Catchup: []string{"n3"}, EpochForWrite: 1, LeaderSession: "host-1700000000", Replicas: 3}

	first, created, err := a.Create(ctx, st)
	if err != nil || !created {
		t.Fatalf("first create: created=%v err=%v", created, err)
	}
	if first.Revision <= 0 {
		t.Fatalf("first create returned revision %d", first.Revision)
	}
	want := st
	want.Revision = first.Revision
	samePartition(t, "first create", first, want)

	other := st
	other.Leader, other.ISR, other.Catchup = "n2", []string{"n2"}, nil
	again, created, err := a.Create(ctx, other)
	if err != nil || created {
		t.Fatalf("second create: created=%v err=%v", created, err)
	}
	samePartition(t, "second create", again, first)

	got, ok, err := a.Get(ctx, "orders", 3)
	if err != nil || !ok {
		t.Fatalf("Get: %v, %v", ok, err)
	}
	samePartition(t, "Get", got, first)
	if _, ok, err := a.Get(ctx, "orders", 4); ok || err != nil {
		t.Errorf("Get(missing) = %v, %v; want false, nil", ok, err)
	}
}

func TestPartitionStateRejectsBadInput(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	good := PartitionState{Topic: "orders", Partition: 0, Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2}
	tests := []struct {
		name string
		set  func(*PartitionState)
		want string
	}{
		{"bad topic", func(s *PartitionState) { s.Topic = "a/b" }, "invalid topic name"},
		{"empty topic", func(s *PartitionState) { s.Topic = "" }, "invalid topic name"},
		{"negative partition", func(s *PartitionState) { s.Partition = -1 }, "must not be negative"},
		{"no replicas", func(s *PartitionState) { s.Replicas = 0 }, "replicas must be at least 1"},
		{"negative epoch", func(s *PartitionState) { s.EpochForWrite = -1 }, "negative epoch"},
		{"leader outside ISR", func(s *PartitionState) { s.Leader = "n9" }, "not in the ISR"},
		{"empty node", func(s *PartitionState) { s.Catchup = []string{""} }, "empty node ID"},
		{"node in ISR and catchup", func(s *PartitionState) { s.Catchup = []string{"n2"} }, "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := good
			tt.set(&st)
			if _, _, err := a.Create(ctx, st); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Create error %v, want one mentioning %q", err, tt.want)
			}
			st.Revision = 1
			if _, err := a.CompareAndSwap(ctx, st); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CompareAndSwap error %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := a.CompareAndSwap(ctx, good); err == nil || !strings.Contains(err.Error(), "use Create") {
		t.Errorf("CompareAndSwap without a revision: error %v", err)
	}
	if _, _, err := a.Get(ctx, "orders", -2); err == nil {
		t.Error("Get of a negative partition succeeded")
	}
	if _, err := a.List(ctx, "bad topic"); err == nil {
		t.Error("List of an invalid topic succeeded")
	}
	if err := a.Delete(ctx, ""); err == nil {
		t.Error("Delete of an empty topic name succeeded")
	}
	if _, err := a.ShrinkISR(ctx, "orders", 0, "", []string{"n2"}); err == nil {
		t.Error("ShrinkISR with an empty leader succeeded")
	}
}

func TestCompareAndSwapLetsOneOfTwoWritersWin(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	read := mustCreatePartition(t, a, PartitionState{Topic: "orders", Leader: "n1",
		ISR: []string{"n1", "n2", "n3"}, EpochForWrite: 1, Replicas: 3})

	writes := make([]PartitionState, 2)
	results := make([]PartitionState, 2)
	errs := make([]error, 2)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, leader := range []string{"n2", "n3"} {
		writes[i] = read
		writes[i].Leader, writes[i].EpochForWrite = leader, 2
		wg.Go(func() {
			<-start
			results[i], errs[i] = a.CompareAndSwap(ctx, writes[i])
		})
	}
	close(start)
	wg.Wait()

	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	if errs[winner] != nil || !errors.Is(errs[loser], ErrConflict) {
		t.Fatalf("errors = %v; want exactly one ErrConflict", errs)
	}
	want := writes[winner]
	want.Revision = results[winner].Revision
	if want.Revision <= read.Revision {
		t.Errorf("new revision %d not after %d", want.Revision, read.Revision)
	}
	samePartition(t, "winner's result", results[winner], want)
	samePartition(t, "state returned with the conflict", results[loser], want)
	stored, _, err := a.Get(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	samePartition(t, "stored", stored, want)

	// The loser retrying with what it was handed succeeds.
	retry := results[loser]
	retry.Catchup = []string{"n4"}
	if _, err := a.CompareAndSwap(ctx, retry); err != nil {
		t.Errorf("retry after conflict: %v", err)
	}

	if err := a.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	_, err = a.CompareAndSwap(ctx, retry)
	if !errors.Is(err, ErrConflict) || !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("swap of a deleted partition: %v; want ErrConflict and ErrPartitionNotFound", err)
	}
}

// Behaviour 11 (docs/replication.md#isr-shrink): ISR removal is refused when
// it would leave Replicas/2 or fewer in sync; removed nodes go to catch-up,
// and the epoch does not change.
func TestBehaviour11ShrinkISR(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	tests := []struct {
		name        string
		isr         []string
		catchup     []string
		leader      string // stored leader
		replicas    int32
		caller      string
		remove      []string
		wantErr     error
		wantISR     []string
		wantCatchup []string
	}{
		{name: "follower moves to catchup", isr: []string{"a", "b", "c"}, leader: "a", replicas: 3, caller: "a",
			remove: []string{"c"}, wantISR: []string{"a", "b"}, wantCatchup: []string{"c"}},
		{name: "appends to catchup", isr: []string{"a", "b", "c", "d"}, catchup: []string{"e"}, leader: "a", replicas: 5,
			caller: "a", remove: []string{"b"}, wantISR: []string{"a", "c", "d"}, wantCatchup: []string{"e", "b"}},
		{name: "two at once", isr: []string{"a", "b", "c", "d", "e"}, leader: "a", replicas: 5, caller: "a",
			remove: []string{"e", "b"}, wantISR: []string{"a", "c", "d"}, wantCatchup: []string{"b", "e"}},
		{name: "nodes outside the ISR are ignored", isr: []string{"a", "b", "c"}, catchup: []string{"d"}, leader: "a", replicas: 3,
			caller: "a", remove: []string{"d", "x"}, wantISR: []string{"a", "b", "c"}, wantCatchup: []string{"d"}},
		{name: "would leave no majority", isr: []string{"a", "b"}, catchup: []string{"c"}, leader: "a", replicas: 3,
			caller: "a", remove: []string{"b"}, wantErr: ErrISRTooSmall},
		{name: "two at once would leave no majority", isr: []string{"a", "b", "c"}, leader: "a", replicas: 3,
			caller: "a", remove: []string{"b", "c"}, wantErr: ErrISRTooSmall},
		{name: "even replicas need more than half", isr: []string{"a", "b"}, leader: "a", replicas: 2,
			caller: "a", remove: []string{"b"}, wantErr: ErrISRTooSmall},
		{name: "caller is not the leader", isr: []string{"a", "b", "c"}, leader: "a", replicas: 3,
			caller: "b", remove: []string{"c"}, wantErr: ErrConflict},
		{name: "partition has no leader", isr: []string{"a", "b", "c"}, replicas: 3,
			caller: "a", remove: []string{"c"}, wantErr: ErrConflict},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := mustCreatePartition(t, a, PartitionState{Topic: "shrink", Partition: int32(i), Leader: tt.leader,
				ISR: tt.isr, Catchup: tt.catchup, EpochForWrite: 7, LeaderSession: "s", Replicas: tt.replicas})
			got, err := a.ShrinkISR(ctx, "shrink", int32(i), tt.caller, tt.remove)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			stored, _, err := a.Get(ctx, "shrink", int32(i))
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != nil || slices.Equal(tt.isr, tt.wantISR) {
				samePartition(t, "stored after no change", stored, before)
				return
			}
			want := before
			want.ISR, want.Catchup, want.Revision = tt.wantISR, tt.wantCatchup, stored.Revision
			samePartition(t, "stored", stored, want)
			samePartition(t, "returned", got, stored)
			if stored.Revision == before.Revision {
				t.Error("revision unchanged")
			}
		})
	}

	if _, err := a.ShrinkISR(ctx, "shrink", 99, "a", []string{"b"}); !errors.Is(err, ErrPartitionNotFound) {
		t.Errorf("shrink of a missing partition: %v, want ErrPartitionNotFound", err)
	}
	mustCreatePartition(t, a, PartitionState{Topic: "self", Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3})
	_, err := a.ShrinkISR(ctx, "self", 0, "a", []string{"a"})
	if err == nil || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cannot remove itself") {
		t.Errorf("leader removing itself: %v", err)
	}
}

func TestShrinkISRRetriesConcurrentChanges(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	isr := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	mustCreatePartition(t, a, PartitionState{Topic: "orders", Leader: "a", ISR: isr, EpochForWrite: 3, Replicas: 9})

	removed := []string{"b", "c", "d", "e"}
	errs := make([]error, len(removed))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, node := range removed {
		wg.Go(func() {
			<-start
			_, errs[i] = a.ShrinkISR(ctx, "orders", 0, "a", []string{node})
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	st, _, err := a.Get(ctx, "orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	catchup := slices.Sorted(slices.Values(st.Catchup))
	if !slices.Equal(st.ISR, []string{"a", "f", "g", "h", "i"}) || !slices.Equal(catchup, removed) || st.EpochForWrite != 3 {
		t.Errorf("after concurrent shrinks: ISR %v, catchup %v, epoch %d", st.ISR, st.Catchup, st.EpochForWrite)
	}
}

func TestListAndDeletePartitions(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	var all []string
	for _, topic := range []string{"orders2", "orders", "audit"} {
		for p := int32(11); p >= 0; p-- {
			mustCreatePartition(t, a, PartitionState{Topic: topic, Partition: p, Leader: "n1", ISR: []string{"n1"}, Replicas: 1})
		}
	}
	for _, topic := range []string{"audit", "orders", "orders2"} {
		for p := range 12 {
			all = append(all, fmt.Sprintf("%s/%d", topic, p))
		}
	}
	names := func(topic string) []string {
		t.Helper()
		states, err := a.List(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range states {
			out = append(out, fmt.Sprintf("%s/%d", st.Topic, st.Partition))
		}
		return out
	}

	if got := names(""); !slices.Equal(got, all) {
		t.Errorf("List(all) = %v\nwant %v", got, all)
	}
	if got := names("orders"); !slices.Equal(got, all[12:24]) {
		t.Errorf("List(orders) = %v", got)
	}
	if got := names("missing"); len(got) != 0 {
		t.Errorf("List(missing) = %v", got)
	}
	if err := a.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if got := names(""); !slices.Equal(got, slices.Concat(all[:12], all[24:])) {
		t.Errorf("after deleting orders: %v", got)
	}
	if err := a.Delete(ctx, "missing"); err != nil {
		t.Errorf("delete of a missing topic: %v", err)
	}
}

func TestWatchPartitionsSeesChangesInOrder(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	p0 := mustCreatePartition(t, a, PartitionState{Topic: "orders", Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2})
	other := mustCreatePartition(t, a, PartitionState{Topic: "audit", Leader: "n1", ISR: []string{"n1"}, Replicas: 1})

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	orders := oneByOne(t, a.Watch(wctx, "orders"))
	everything := oneByOne(t, a.Watch(wctx, ""))
	samePartition(t, "current", receive(t, orders), p0)
	samePartition(t, "all: first", receive(t, everything), other)
	samePartition(t, "all: second", receive(t, everything), p0)

	p1 := mustCreatePartition(t, a, PartitionState{Topic: "orders", Partition: 1, Leader: "n2", ISR: []string{"n2"}, Replicas: 2})
	mustCreatePartition(t, a, PartitionState{Topic: "audit", Partition: 1, Leader: "n1", ISR: []string{"n1"}, Replicas: 1})
	swap := p0
	swap.Leader, swap.EpochForWrite = "n2", 2
	p0, err := a.CompareAndSwap(ctx, swap)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}

	want := []PartitionState{p1, p0, {Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}}
	for i, w := range want {
		samePartition(t, fmt.Sprintf("orders change %d", i), receive(t, orders), w)
	}
	if st := receive(t, everything); st.Topic != "orders" || st.Partition != 1 {
		t.Errorf("all: after creating orders/1 got %+v", st)
	}
	if st := receive(t, everything); st.Topic != "audit" || st.Partition != 1 {
		t.Errorf("all: after creating audit/1 got %+v", st)
	}

	cancel()
	expectClosed(t, orders)
	expectClosed(t, everything)
	expectClosed(t, a.Watch(ctx, "not/valid"))
}

// The states the watch lists come as one batch, and the states one
// transaction changed as one batch, in the transaction's order.
func TestWatchPartitionsDeliversATransactionAsOneBatch(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	var created []PartitionState
	for p := range int32(5) {
		created = append(created, mustCreatePartition(t, a, PartitionState{Topic: "b", Partition: p, Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2}))
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := a.Watch(wctx, "b")
	if listed := receive(t, ch); len(listed) != len(created) {
		t.Fatalf("the listed states came as a batch of %d, want %d", len(listed), len(created))
	}
	var elections []PartitionState
	for _, st := range slices.Backward(created[1:]) {
		st.Leader, st.ISR, st.EpochForWrite = "n2", []string{"n2"}, 2
		elections = append(elections, st)
	}
	results := a.CompareAndSwapAll(ctx, elections)
	for _, res := range results {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	batch := receive(t, ch)
	if len(batch) != len(elections) {
		t.Fatalf("a transaction of %d states came as a batch of %d", len(elections), len(batch))
	}
	for i, st := range batch {
		samePartition(t, fmt.Sprintf("state %d of the batch", i), st, results[i].Stored)
	}
}

// flakyProxy forwards TCP connections to target until cut, which drops
// them and refuses new ones until heal.
type flakyProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func startFlakyProxy(t *testing.T, target string) *flakyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &flakyProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *flakyProxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		out, err := net.Dial("tcp", p.target)
		if p.down || err != nil {
			in.Close()
			if out != nil {
				out.Close()
			}
			p.mu.Unlock()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(out, in); out.Close() })
		p.wg.Go(func() { io.Copy(in, out); in.Close() })
	}
}

func (p *flakyProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *flakyProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = false
}

func TestWatchPartitionsSurvivesCompaction(t *testing.T) {
	a, direct, cfg := newTestAssignments(t)
	ctx := context.Background()
	proxy := startFlakyProxy(t, cfg.ClientAddr)
	watched := NewAssignments(newTestClient(t, proxy.ln.Addr().String()), "")

	p0 := mustCreatePartition(t, a, PartitionState{Topic: "orders", Leader: "n1", ISR: []string{"n1", "n2"}, EpochForWrite: 1, Replicas: 2})
	p2 := mustCreatePartition(t, a, PartitionState{Topic: "orders", Partition: 2, Leader: "n1", ISR: []string{"n1"}, Replicas: 2})
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := oneByOne(t, watched.Watch(wctx, "orders"))
	samePartition(t, "current p0", receive(t, ch), p0)
	samePartition(t, "current p2", receive(t, ch), p2)

	// While the watcher is cut off, change everything and compact the
	// history it would resume from.
	proxy.cut()
	swap := p0
	swap.ISR, swap.Catchup = []string{"n1"}, []string{"n2"}
	p0, err := a.CompareAndSwap(ctx, swap)
	if err != nil {
		t.Fatal(err)
	}
	p1 := mustCreatePartition(t, a, PartitionState{Topic: "orders", Partition: 1, Leader: "n2", ISR: []string{"n2"}, Replicas: 2})
	if _, err := direct.Delete(ctx, a.key("orders", 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := direct.Compact(ctx, p1.Revision+1, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	proxy.heal()

	latest := map[int32]PartitionState{}
	want := map[int32]PartitionState{0: p0, 1: p1, 2: {Topic: "orders", Partition: 2}}
	for !reflect.DeepEqual(latest, want) {
		st := receive(t, ch)
		latest[st.Partition] = st
	}
}

// A caught-up node moves from catch-up into the ISR with EpochForWrite
// incremented (behaviour 12); only the leader may ask.
func TestJoinISRIncrementsEpoch(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	if _, _, err := a.Create(ctx, PartitionState{Topic: "j", Partition: 0, Leader: "a", ISR: []string{"a", "b"}, Catchup: []string{"c"}, EpochForWrite: 3, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.JoinISR(ctx, "j", 0, "b", "c"); !errors.Is(err, ErrConflict) {
		t.Fatalf("join asked by a non-leader: %v", err)
	}
	if _, err := a.JoinISR(ctx, "j", 0, "a", "d"); err == nil {
		t.Fatal("joined a node that was not catching up")
	}
	st, err := a.JoinISR(ctx, "j", 0, "a", "c")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.ISR, []string{"a", "b", "c"}) || len(st.Catchup) != 0 || st.EpochForWrite != 4 {
		t.Fatalf("after join: %+v", st)
	}
}

// A leader that failed a write records its writes disabled, and re-enables
// them with EpochForWrite incremented and nothing else changed; no other
// node may.
func TestReenableWritesIncrementsEpoch(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	if _, _, err := a.Create(ctx, PartitionState{Topic: "r", Partition: 0, Leader: "a", ISR: []string{"a", "b"}, Catchup: []string{"c"}, EpochForWrite: 7, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ReenableWrites(ctx, "r", 0, "b"); !errors.Is(err, ErrConflict) {
		t.Fatalf("re-enabled by a non-leader: %v", err)
	}
	if st, err := a.DisableWrites(ctx, "r", 0, "a"); err != nil || !st.WriteDisabled || st.EpochForWrite != 7 {
		t.Fatalf("after disable: %+v %v", st, err)
	}
	st, err := a.ReenableWrites(ctx, "r", 0, "a")
	if err != nil {
		t.Fatal(err)
	}
	if st.WriteDisabled || st.EpochForWrite != 8 || st.Leader != "a" || !slices.Equal(st.ISR, []string{"a", "b"}) || !slices.Equal(st.Catchup, []string{"c"}) {
		t.Fatalf("after re-enable: %+v", st)
	}
}

// CreateAll stores a topic's partition states in transactions of up to
// maxTxnPartitions; where another node created some of a chunk first, the
// states already stored are kept and the rest are created.
func TestCreateAllKeepsWhatExists(t *testing.T) {
	a, _, _ := newTestAssignments(t)
	ctx := context.Background()
	const n = maxTxnPartitions + 10
	states := make([]PartitionState, n)
	for p := range states {
		states[p] = PartitionState{Topic: "wide", Partition: int32(p), Leader: "n1", ISR: []string{"n1"}, EpochForWrite: 1, Replicas: 1}
	}
	other := states[n-1]
	other.Leader, other.ISR = "n2", []string{"n2"}
	mustCreatePartition(t, a, other)
	if err := a.CreateAll(ctx, states); err != nil {
		t.Fatal(err)
	}
	got, err := a.List(ctx, "wide")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n {
		t.Fatalf("%d partition states stored, want %d", len(got), n)
	}
	for _, st := range got {
		want := "n1"
		if st.Partition == n-1 {
			want = "n2" // created first by another node: kept
		}
		if st.Leader != want {
			t.Fatalf("partition %d led by %s, want %s", st.Partition, st.Leader, want)
		}
	}
}

// A leadership's name gives back the epoch it began in; a name that holds
// none, or a node name with an "@" of its own, reads right or as unknown.
func TestLeadershipEpochReadsTheLeadershipsName(t *testing.T) {
	for session, want := range map[string]int64{
		Leadership("n1", 5):       5,
		Leadership("host@dc", 12): 12,
		"":                        0,
		"n1":                      0,
		"n1@":                     0,
		"n1@x":                    0,
		"n1@-3":                   0,
	} {
		if got := LeadershipEpoch(session); got != want {
			t.Errorf("LeadershipEpoch(%q) = %d, want %d", session, got, want)
		}
	}
}
