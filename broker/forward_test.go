package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// Concurrent forwards share a few kept-alive connections to the leader
// instead of dialing one per publish.
func TestForwardsReuseConnectionsToTheLeader(t *testing.T) {
	var conns, pubs atomic.Int64
	leader := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pubs.Add(1)
		w.Write([]byte("OK"))
	}))
	leader.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	leader.Start()
	defer leader.Close()

	b := brokerWithLeader("n2", leader.Listener.Addr().String())
	const workers, each = 16, 50
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0); err != nil {
					t.Errorf("forward: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if pubs.Load() != workers*each {
		t.Fatalf("leader got %d publishes, want %d", pubs.Load(), workers*each)
	}
	if n := conns.Load(); n > 2*workers {
		t.Fatalf("%d forwards opened %d connections to the leader; want at most %d", workers*each, n, 2*workers)
	}
}

// A burst of forwards far larger than the connection bound, all at once
// as a pipelining client starts them, holds at most forwardConns sockets
// to the leader at once, and every forward is answered: with the leader
// keeping its connections, and with it closing each after its answer, so
// that every request's connection is replaced while others wait. The
// forwards beyond the bound wait for a connection together, and go to
// the leader in batches (ForwardsPath) rather than one request each.
//
// The sockets are counted where this node holds them, from a dial's start
// until its Close has returned. The leader's count of its connections
// lags: it lets go of one only when it reads the close, after the
// replacement may have arrived.
func TestForwardBurstHoldsBoundedConnections(t *testing.T) {
	for _, c := range []struct {
		name  string
		close bool
	}{{"kept", false}, {"closed", true}} {
		t.Run(c.name, func(t *testing.T) {
			const burst = 20 * forwardConns
			arrived, release := make(chan struct{}, burst), make(chan struct{})
			var requests, published atomic.Int64
			leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				body, _ := io.ReadAll(r.Body)
				n := 1
				var batch []Forward
				if r.URL.Path == ForwardsPath {
					var err error
					if batch, err = DecodeForwards(body, 1<<20); err != nil {
						t.Errorf("leader got an unreadable batch: %v", err)
						w.WriteHeader(http.StatusBadRequest)
						return
					}
					n = len(batch)
				}
				for range n {
					arrived <- struct{}{}
				}
				published.Add(int64(n))
				<-release
				if c.close {
					w.Header().Set("Connection", "close")
				}
				if batch == nil {
					w.Write([]byte("OK"))
					return
				}
				var out []byte
				for i := range batch {
					out = AppendForwardAnswer(out, i, "")
				}
				w.Write(out)
			}))
			defer leader.Close()

			var open, most, dials atomic.Int64
			var d net.Dialer
			b := brokerWithLeader("n2", leader.Listener.Addr().String())
			b.forwarder = newForwardClient(func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				n := open.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				conn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					open.Add(-1)
					return nil, err
				}
				return &closeCounted{Conn: conn, open: &open}, nil
			})
			defer b.forwarder.CloseIdleConnections()

			errs := make(chan *topic.Error, burst)
			for range burst {
				go func() { errs <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
			}
			// Every connection the bound allows holds a forward before any
			// is answered.
			for range forwardConns {
				<-arrived
			}
			close(release)
			for range burst {
				if err := <-errs; err != nil {
					t.Fatalf("forward: %v", err)
				}
			}
			if n := most.Load(); n > forwardConns {
				t.Fatalf("%d forwards at once held %d sockets to the leader; want at most %d", burst, n, forwardConns)
			}
			if published.Load() != burst {
				t.Fatalf("the leader got %d publishes of %d", published.Load(), burst)
			}
			if requests.Load() >= burst {
				t.Fatalf("%d forwards took %d requests; those waiting for a connection should share them", burst, requests.Load())
			}
			if c.close && dials.Load() < requests.Load() {
				t.Fatalf("%d requests to a leader closing each connection dialed %d; want one each", requests.Load(), dials.Load())
			}
		})
	}
}

// closeCounted leaves the count of open sockets once it is closed.
type closeCounted struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *closeCounted) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.open.Add(-1) })
	return err
}

// A forward to a leader that stopped answering fails as soon as the
// partition's leader changes, not after the forward timeout.
func TestForwardToAFormerLeaderEndsWhenLeadershipMoves(t *testing.T) {
	stuck, arrived := stuckLeader(t, 1)
	b := brokerWithLeader("n2", stuck.Listener.Addr().String())
	key := partitionKey{"t", 0}
	done := make(chan *topic.Error, 1)
	go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
	<-arrived
	// A watch delivery that keeps the leader must not end the forward.
	kept := b.currentView().leader(key)
	b.setPartition(leads(key, "n2"))
	if b.currentView().leader(key) != kept || kept.ended.Err() != nil {
		t.Fatal("a delivery naming the same leader ended its leadership")
	}
	select {
	case err := <-done:
		t.Fatalf("forward ended while n2 still led: %v", err)
	default:
	}
	moved := time.Now()
	b.setPartition(leads(key, "n3"))
	select {
	case err := <-done:
		if err == nil || err.Code != "E_FAILED_ON_NOT_WRITABLE" {
			t.Fatalf("forward to the former leader answered %v, want E_FAILED_ON_NOT_WRITABLE", err)
		}
		t.Logf("failed %v after the leader moved: %s", time.Since(moved).Round(time.Millisecond), err.Text)
	case <-time.After(2 * time.Second):
		t.Fatal("the forward to the former leader still waits 2 s after leadership moved")
	}
}

// A forward hands the leader a deadline MaxClockSkew before it gives up:
// a leader whose clock lags the forwarder's by less than that still
// passes the deadline, and refuses, while the forwarder waits, and the
// client hears the leader's refusal rather than a timeout. With no margin,
// the forwarder would give up while this leader could still write.
func TestForwardGivesUpOnlyAfterTheLeadersDeadline(t *testing.T) {
	const timeout, skew, lag = 3 * time.Second, 2 * time.Second, time.Second
	type seen struct {
		deadline, arrived time.Time
		err               string
	}
	saw := make(chan seen, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{arrived: time.Now()}
		defer func() { saw <- s }()
		// Read to the end, so the server notices the forwarder leaving.
		io.Copy(io.Discard, r.Body)
		fwd, err := ForwardedBy(r.Header)
		if err != nil || fwd.Deadline.IsZero() || fwd.By != "n1" {
			s.err = fmt.Sprintf("forwarded %+v, %v: want n1's with a deadline", fwd, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		s.deadline = fwd.Deadline
		// This leader's clock reads lag less than the forwarder's: it
		// passes the deadline lag later.
		select {
		case <-time.After(time.Until(fwd.Deadline.Add(lag))):
		case <-r.Context().Done():
			s.err = fmt.Sprintf("the forwarder gave up %v before the leader's clock passed the deadline", time.Until(fwd.Deadline.Add(lag)))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"message":"FAILED_ON_NOT_WRITABLE"}`))
	}))
	defer leader.Close()

	b := brokerWithLeader("n2", leader.Listener.Addr().String())
	b.cfg.ForwardTimeout, b.cfg.MaxClockSkew = timeout, skew
	replies := make(chan topic.Reply, 1)
	began := time.Now()
	b.forward(&Topic{Name: "t"}, 0, [][]byte{[]byte("m")}, 0, func(r topic.Reply) { replies <- r })
	s := <-saw
	if s.err != "" {
		t.Fatal(s.err)
	}
	if lo, hi := began.Add(timeout-skew), s.arrived.Add(timeout-skew); s.deadline.Before(lo) || s.deadline.After(hi) {
		t.Fatalf("deadline %v after the forward began, want between %v and %v", s.deadline.Sub(began), lo.Sub(began), hi.Sub(began))
	}
	r := <-replies
	if r.Err == nil || r.Err.Code != "E_FAILED_ON_NOT_WRITABLE" || r.Err.Text != "at the leader" {
		t.Fatalf("client heard %+v, want the leader's refusal", r.Err)
	}
}

// A bad deadline or epoch header is an error, none is a client's publish,
// and a good one is read back as sent.
func TestForwardedByReadsTheHeaders(t *testing.T) {
	at := time.Unix(1_700_000_000, 123)
	for _, c := range []struct {
		header http.Header
		want   Forwarded
		bad    bool
	}{
		{http.Header{}, Forwarded{}, false},
		{http.Header{ForwardedHeader: {"n1"}}, Forwarded{By: "n1"}, false},
		{http.Header{ForwardedHeader: {"n1"}, DeadlineHeader: {"1700000000000000123"}}, Forwarded{By: "n1", Deadline: at}, false},
		{http.Header{ForwardedHeader: {"n1"}, DeadlineHeader: {"0"}}, Forwarded{}, true},
		{http.Header{ForwardedHeader: {"n1"}, DeadlineHeader: {"2026-11-24T22:00:00Z"}}, Forwarded{}, true},
		{http.Header{ForwardedHeader: {"n1"}, EpochHeader: {"7"}}, Forwarded{By: "n1", SeenEpoch: 7}, false},
		{http.Header{ForwardedHeader: {"n1"}, EpochHeader: {"0"}}, Forwarded{}, true},
		{http.Header{ForwardedHeader: {"n1"}, EpochHeader: {"seven"}}, Forwarded{}, true},
	} {
		got, err := ForwardedBy(c.header)
		if c.bad {
			if !errors.Is(err, ErrBadDeadline) && !errors.Is(err, ErrBadEpoch) {
				t.Errorf("%v: %+v, %v; want ErrBadDeadline or ErrBadEpoch", c.header, got, err)
			}
			continue
		}
		if err != nil || got.By != c.want.By || !got.Deadline.Equal(c.want.Deadline) || got.SeenEpoch != c.want.SeenEpoch {
			t.Errorf("%v: %+v, %v; want %+v", c.header, got, err, c.want)
		}
	}
}

// A forward names the epoch of the partition state its view chose the
// leader from, the latest one: a follower joining the ISR moves it on
// under the same leader.
func TestForwardNamesTheEpochItChoseTheLeaderIn(t *testing.T) {
	epochs := make(chan int64, 1)
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		fwd, err := ForwardedBy(r.Header)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
		}
		epochs <- fwd.SeenEpoch
	}))
	defer leader.Close()

	b := brokerWithLeader("n2", leader.Listener.Addr().String())
	key := partitionKey{"t", 0}
	for _, epoch := range []int64{5, 6} {
		st := leads(key, "n2")
		st.EpochForWrite, st.Revision = epoch, epoch
		b.setPartition(st)
		if err := b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0); err != nil {
			t.Fatalf("forward in epoch %d: %v", epoch, err)
		}
		if got := <-epochs; got != epoch {
			t.Fatalf("forward named epoch %d, want the view's %d", got, epoch)
		}
	}
}

// brokerWithLeader is a broker on n1 whose view has leader, at addr, leading
// partition 0 of topic t.
func brokerWithLeader(leader, addr string) *Broker {
	b := &Broker{cfg: Config{NodeID: "n1"}}
	b.setNodes([]cluster.NodeInfo{{ID: leader, HTTPAddress: addr}})
	b.setPartition(leads(partitionKey{"t", 0}, leader))
	return b
}

// A forward's answer tells this node's admission nothing of its own
// queue: how long it took is the leader's, which the leader's admission
// bounds. It comes back settling, so a slow leader cannot cut the limit
// of the node forwarding to it.
func TestForwardedAnswersAreNoQueueOfTheForwarder(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("OK"))
	}))
	defer leader.Close()
	b := brokerWithLeader("n2", leader.Listener.Addr().String())
	b.cfg.ForwardTimeout = 5 * time.Second
	replies := make(chan topic.Reply, 1)
	b.forward(&Topic{Name: "t"}, 0, [][]byte{[]byte("m")}, 0, func(r topic.Reply) { replies <- r })
	if r := <-replies; r.Err != nil || !r.Settling {
		t.Fatalf("forward answered %+v, want OK and settling", r)
	}
}

// A forward to a partition whose leader the view's live nodes no longer
// hold (it died; its successor is not elected yet) waits for the view
// without asking etcd: through a failover every publish to the dead node's
// partitions would otherwise be an etcd read. It fails with
// E_FAILED_ON_NOT_LEADER when its time is up. This broker has no etcd
// client, so asking would panic.
func TestForwardToAnUnregisteredLeaderWaitsWithoutAskingEtcd(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: "n1", ForwardTimeout: time.Second}}
	b.setNodes([]cluster.NodeInfo{{ID: "n2", HTTPAddress: "127.0.0.1:1"}})
	b.setPartition(leads(partitionKey{"t", 0}, "n3"))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := b.forwardTo(ctx, "t", 0, [][]byte{[]byte("m")}, 0); err != topic.ErrNotLeader {
		t.Fatalf("forward to an unregistered leader answered %v, want E_FAILED_ON_NOT_LEADER", err)
	}
}

// A forward whose view names no leader for the partition, or a leader
// whose registration the node watch has not delivered yet, waits for the
// view to change rather than failing: it reaches the leader as soon as the
// view names one it can reach, and fails only when its time is up.
func TestForwardWaitsForTheViewToNameAReachableLeader(t *testing.T) {
	leader := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("OK"))
	}))
	defer leader.Close()
	addr := leader.Listener.Addr().String()
	key := partitionKey{"t", 0}
	forward := func(b *Broker) chan *topic.Error {
		done := make(chan *topic.Error, 1)
		go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
		return done
	}
	unanswered := func(done chan *topic.Error) {
		select {
		case err := <-done:
			t.Fatalf("the forward answered %v before the view named a reachable leader", err)
		default:
		}
	}

	// Registered late: the partition watch named n2 before the node watch
	// delivered n2's registration.
	b := &Broker{cfg: Config{NodeID: "n1"}}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}})
	b.setPartition(leads(key, "n2"))
	done := forward(b)
	eventually(t, "the forward to wait on the view", func() bool { return b.Admission().ForwardsWaiting == 1 })
	unanswered(done)
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n2", HTTPAddress: addr}})
	if err := <-done; err != nil {
		t.Fatalf("after n2 registered the forward answered %v", err)
	}

	// Leaderless: an election is on.
	b = &Broker{cfg: Config{NodeID: "n1"}}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n3", HTTPAddress: addr}})
	b.setPartition(leads(key, ""))
	done = forward(b)
	eventually(t, "the forward to wait on the view", func() bool { return b.Admission().ForwardsWaiting == 1 })
	b.setPartition(leads(partitionKey{"t", 1}, "n3")) // another partition's election
	unanswered(done)
	b.setPartition(leads(key, "n3"))
	if err := <-done; err != nil {
		t.Fatalf("after n3 was elected the forward answered %v", err)
	}

	// Still leaderless when its time is up.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	b.setPartition(leads(key, ""))
	if err := b.forwardTo(ctx, "t", 0, [][]byte{[]byte("m")}, 0); err == nil || err.Code != topic.ErrNotLeader.Code {
		t.Fatalf("a forward to a partition that stayed leaderless answered %v, want %s", err, topic.ErrNotLeader.Code)
	}
}

// A leader's port that refused a forward's connection is taken as
// refusing by the forwards right after it, without a dial each, until the
// cluster's nodes change: a killed leader's partitions drew thousands of
// refused dials from each survivor before their successors were elected.
func TestForwardsTakeARefusalWithoutDiallingUntilTheNodesChange(t *testing.T) {
	defer func(d time.Duration) { refusalStands = d }(refusalStands)
	refusalStands = time.Hour  // the nodes' change alone ends it here
	const addr = "127.0.0.1:1" // nothing listens
	var dials atomic.Int64
	b := brokerWithLeader("n2", addr)
	b.forwarder = newForwardClient(func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
	forward := func() *topic.Error {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		return b.forwardTo(ctx, "t", 0, [][]byte{[]byte("m")}, 0)
	}
	for i := range 5 {
		if err := forward(); err == nil {
			t.Fatalf("forward %d to a port that refuses succeeded", i)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("5 forwards to a refusing port dialled %d times; want 1", n)
	}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n2", HTTPAddress: addr}})
	if err := forward(); err == nil {
		t.Fatal("forward to a port that refuses succeeded")
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("after the nodes changed the forwards dialled %d times in all; want 2", n)
	}
}

// Forwards waiting for a connection to a leader whose port begins to
// refuse (a killed leader: its connections reset, and the pool's queue
// behind them) take the refusal the first dials met instead of each
// dialling in turn: at most one dial for each connection the pool had.
func TestForwardsQueuedForAConnectionTakeARefusal(t *testing.T) {
	defer func(d time.Duration) { refusalStands = d }(refusalStands)
	refusalStands = time.Hour // the test's forwards alone end it
	stuck, arrived := stuckLeader(t, forwardConns)
	addr := stuck.Listener.Addr().String()
	b := brokerWithLeader("n2", addr)
	var dead atomic.Bool
	var refusedDials atomic.Int64
	b.forwarder = newForwardClient(func(ctx context.Context, network, a string) (net.Conn, error) {
		if dead.Load() {
			refusedDials.Add(1)
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, a)
	})
	defer b.forwarder.CloseIdleConnections()
	forward := func(ctx context.Context) chan *topic.Error {
		done := make(chan *topic.Error, 1)
		go func() { done <- b.forwardTo(ctx, "t", 0, [][]byte{[]byte("m")}, 0) }()
		return done
	}

	heldCtx, kill := context.WithCancel(t.Context())
	held := make([]chan *topic.Error, forwardConns)
	for i := range held {
		held[i] = forward(heldCtx)
	}
	for range forwardConns {
		<-arrived
	}
	const queued = 4 * forwardConns
	queuedCtx, giveUp := context.WithCancel(t.Context())
	waiting := make([]chan *topic.Error, queued)
	for i := range waiting {
		waiting[i] = forward(queuedCtx)
	}
	eventually(t, "the forwards to queue for a connection", func() bool { return b.Admission().ForwardsQueued == queued })
	// The leader dies: its connections end and its port refuses.
	dead.Store(true)
	kill()
	for _, h := range held {
		<-h
	}
	// Each queued forward, refused, waits for the view to name another
	// leader.
	eventually(t, "every queued forward to be refused", func() bool { return b.Admission().ForwardsWaiting == queued })
	if n := refusedDials.Load(); n == 0 || n > forwardConns {
		t.Errorf("%d forwards queued behind a leader whose port refuses dialled it %d times; want 1 to %d, one a connection", queued, n, forwardConns)
	}
	giveUp()
	for _, w := range waiting {
		if err := <-w; err == nil {
			t.Fatal("a forward to a port that refuses succeeded")
		}
	}
}

// eventually checks cond on every tick of a millisecond ticker until it
// holds, failing the test once 5 s have passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// A publish that names no partition is forwarded to a partition whose
// leader this node can reach, not to one whose election is on.
func TestForwardPicksAPartitionWithAReachableLeader(t *testing.T) {
	b := &Broker{cfg: Config{NodeID: "n1"}}
	b.setNodes([]cluster.NodeInfo{{ID: "n1"}, {ID: "n2", HTTPAddress: "127.0.0.1:1"}})
	b.setPartition(leads(partitionKey{"t", 0}, ""))   // electing
	b.setPartition(leads(partitionKey{"t", 1}, "n3")) // died, not yet failed over
	b.setPartition(leads(partitionKey{"t", 2}, "n1")) // led here: not forwarded
	b.setPartition(leads(partitionKey{"t", 3}, "n2"))
	tp := &Topic{Name: "t"}
	tp.slots.Store(newSlots(4))
	for range 8 {
		if p := b.pickForward(tp); p != 3 {
			t.Fatalf("picked partition %d, want 3, the one led by a live node elsewhere", p)
		}
	}
}

// A forward the former leader never received goes to the partition's next
// leader instead of failing: one still queued for a connection to it when
// the leadership moved, or one whose dial it reset as it died. Those it
// holds fail, as it may have written them.
func TestForwardNoConnectionCarriedGoesToTheNextLeader(t *testing.T) {
	key := partitionKey{"t", 0}
	var took atomic.Int64
	next := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		took.Add(1)
		w.Write([]byte("OK"))
	}))
	defer next.Close()
	forward := func(b *Broker) chan *topic.Error {
		done := make(chan *topic.Error, 1)
		go func() { done <- b.forwardTo(t.Context(), "t", 0, [][]byte{[]byte("m")}, 0) }()
		return done
	}

	t.Run("queued for a connection", func(t *testing.T) {
		took.Store(0)
		stuck, arrived := stuckLeader(t, forwardConns)
		b := brokerWithLeader("n2", stuck.Listener.Addr().String())
		b.setNodes([]cluster.NodeInfo{{ID: "n2", HTTPAddress: stuck.Listener.Addr().String()}, {ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
		b.forwarder = newForwardClient((&net.Dialer{}).DialContext)
		defer b.forwarder.CloseIdleConnections()

		held := make([]chan *topic.Error, forwardConns)
		for i := range held {
			held[i] = forward(b)
		}
		for range forwardConns {
			<-arrived
		}
		queued := forward(b)
		eventually(t, "the forward to wait for a connection", func() bool { return b.Admission().ForwardsQueued == 1 })
		b.setPartition(leads(key, "n3"))
		if err := <-queued; err != nil {
			t.Fatalf("the forward queued for a connection to the former leader answered %v; want the next leader's OK", err)
		}
		for _, h := range held {
			if err := <-h; err == nil || err.Code != "E_FAILED_ON_NOT_WRITABLE" {
				t.Fatalf("a forward the former leader held answered %v; want E_FAILED_ON_NOT_WRITABLE", err)
			}
		}
		if n := took.Load(); n != 1 {
			t.Fatalf("the next leader took %d publishes; want the queued one alone", n)
		}
	})

	t.Run("dial reset", func(t *testing.T) {
		took.Store(0)
		const dead = "127.0.0.1:1"
		var resets atomic.Int64
		b := brokerWithLeader("n2", dead)
		b.forwarder = newForwardClient(func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == dead {
				resets.Add(1)
				return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNRESET)}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		})
		defer b.forwarder.CloseIdleConnections()
		done := forward(b)
		eventually(t, "the forward to wait on the view after its dial was reset", func() bool {
			return resets.Load() == 1 && b.Admission().ForwardsWaiting == 1
		})
		b.setNodes([]cluster.NodeInfo{{ID: "n3", HTTPAddress: next.Listener.Addr().String()}})
		b.setPartition(leads(key, "n3"))
		if err := <-done; err != nil {
			t.Fatalf("the forward whose dial the dying leader reset answered %v; want the next leader's OK", err)
		}
		if n := took.Load(); n != 1 {
			t.Fatalf("the next leader took %d publishes; want 1", n)
		}
	})
}

// stuckLeader is a leader that reads no publish to the end: each request
// it receives is reported on arrived (room for n) and held until its
// forwarder gives up or the test ends.
func stuckLeader(t *testing.T, n int) (*httptest.Server, chan struct{}) {
	arrived, release := make(chan struct{}, n), make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(release) })
	return stuck, arrived
}
