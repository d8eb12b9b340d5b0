package replication

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/messages"
)

func partitionWrite(topic string, partition int32, logID int64) *messages.LeaderFrame {
	f := writeFrame(logID, 8)
	f.GetWrite().Topic, f.GetWrite().Partition = topic, partition
	return f
}

// Many partitions to one follower node share one connection, and each
// partition's acks come back to the stream that sent its writes.
func TestStreamsOfManyPartitionsShareOneSession(t *testing.T) {
	rec := &recorder{async: true}
	srv, addr := startServer(t, rec, Options{})
	conn := dial(t, addr)
	const partitions = 200
	leaders := make([]*leader, partitions)
	streams := make([]*Stream, partitions)
	for p := range partitions {
		leaders[p] = newLeader(3)
		streams[p] = leaders[p].open(t, conn, Options{})
	}
	for round := int64(1); round <= 3; round++ {
		for p, s := range streams {
			if err := s.Send(partitionWrite("orders", int32(p), round)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for p, l := range leaders {
		for round := int64(1); round <= 3; round++ {
			a := l.nextAck(t)
			if a.GetPartition() != int32(p) {
				t.Fatalf("stream of partition %d got an ack of partition %d", p, a.GetPartition())
			}
		}
	}
	srv.mu.Lock()
	n := len(srv.conns)
	srv.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections for %d partitions, want 1", n, partitions)
	}
}

// A session that goes silent is every partition's follower down, all
// within DownAfter, each told once.
func TestSilentSessionDownForEveryStream(t *testing.T) {
	opt := Options{Heartbeat: 50 * time.Millisecond, DownAfter: 300 * time.Millisecond}
	conn := dial(t, silentServer(t))
	const partitions = 100
	leaders := make([]*leader, partitions)
	start := time.Now()
	for p := range partitions {
		leaders[p] = newLeader(1)
		leaders[p].open(t, conn, opt)
	}
	var last time.Duration
	for p, l := range leaders {
		if err := l.waitDown(t, 10*time.Second); !errors.Is(err, ErrSilent) {
			t.Fatalf("partition %d down with %v, want ErrSilent", p, err)
		}
		last = time.Since(start)
	}
	if last < opt.DownAfter {
		t.Fatalf("down after %v, before DownAfter", last)
	}
	if !raceEnabled && last > opt.DownAfter+promptly() {
		t.Fatalf("last partition down %v after open, DownAfter is %v", last, opt.DownAfter)
	}
	for p, l := range leaders {
		if len(l.down) != 0 {
			t.Fatalf("partition %d told twice", p)
		}
	}
}

// countingServer accepts connections and never answers; accepted lists
// the remote addresses of those accepted so far, in order.
func countingServer(t *testing.T) (addr string, accepted func() []string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			answer(c)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := make([]string, len(conns))
		for i, c := range conns {
			out[i] = c.RemoteAddr().String()
		}
		return out
	}
}

// Replica actors of many partitions opening at once make one connection.
func TestConcurrentOpensDialOnce(t *testing.T) {
	addr, accepted := countingServer(t)
	conn := dial(t, addr)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {})
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// The server accepts in the order connections arrived: once a marker
	// dialled after every open is accepted, so is every session they made.
	marker, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	eventually(t, promptly(), "the marker connection accepted", func() bool {
		return slices.Contains(accepted(), marker.LocalAddr().String())
	})
	if n := len(accepted()) - 1; n != 1 {
		t.Fatalf("%d connections for 100 opens, want 1", n)
	}
}

// Opens to a node that is not there share the failure of one dial for a
// short while instead of each dialling.
func TestFailedDialAnswersOpensAtOnce(t *testing.T) {
	conn := dial(t, freedAddr(t))
	_, first := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {})
	if first == nil {
		t.Fatal("Open succeeded with nothing listening")
	}
	_, again := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {})
	if again == nil || again.Error() != first.Error() {
		t.Fatalf("second Open: %v, want the first dial's error %v", again, first)
	}
}

// Closing one partition's stream leaves the session and the other
// partitions' streams up, and a new stream of that partition gets its acks.
func TestClosingAStreamKeepsTheSession(t *testing.T) {
	srv, addr := startServer(t, &recorder{}, Options{})
	conn := dial(t, addr)
	a, b := newLeader(1), newLeader(1)
	sa, sb := a.open(t, conn, Options{}), b.open(t, conn, Options{})
	for _, tc := range []struct {
		s *Stream
		p int32
		l *leader
	}{{sa, 1, a}, {sb, 2, b}} {
		if err := tc.s.Send(partitionWrite("orders", tc.p, 1)); err != nil {
			t.Fatal(err)
		}
		tc.l.nextAck(t)
	}
	sa.Close()
	a2 := newLeader(1)
	sa2 := a2.open(t, conn, Options{})
	if err := sa2.Send(partitionWrite("orders", 1, 2)); err != nil {
		t.Fatal(err)
	}
	if ack := a2.nextAck(t); ack.GetLogId() != 2 || ack.GetPartition() != 1 {
		t.Fatalf("ack %v", ack)
	}
	if err := sb.Send(partitionWrite("orders", 2, 2)); err != nil {
		t.Fatal(err)
	}
	if ack := b.nextAck(t); ack.GetLogId() != 2 {
		t.Fatalf("ack %v", ack)
	}
	if len(a.acks) != 0 || len(a.down) != 0 {
		t.Fatal("a closed stream heard of its partition again")
	}
	srv.mu.Lock()
	n := len(srv.conns)
	srv.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// After a session breaks, the next Open dials a new one.
func TestOpenAfterTheSessionBrokeRedials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	srv := NewServer(&recorder{}, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn := dial(t, addr)
	l := newLeader(1)
	l.open(t, conn, Options{})
	srv.Stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	l.waitDown(t, promptly())

	// The follower comes back on the same address.
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := NewServer(&recorder{}, Options{})
	go srv2.Serve(ln2)
	t.Cleanup(srv2.Stop)
	l2 := newLeader(1)
	var s2 *Stream
	eventually(t, 10*time.Second, "an Open on the same Conn after the session broke", func() bool {
		s2, err = Open(context.Background(), conn, Options{}, l2.onFrame, l2.onDown)
		return err == nil
	})
	defer s2.Close()
	if err := s2.Send(partitionWrite("orders", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if a := l2.nextAck(t); a.GetLogId() != 1 {
		t.Fatalf("ack %v", a)
	}
}

// A session that breaks is told to OnBroken once, however many streams it
// carried; closing the Conn is no break.
func TestBrokenSessionToldOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&recorder{}, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn := dial(t, ln.Addr().String())
	broken := make(chan error, 10)
	conn.OnBroken(func(err error) { broken <- err })
	leaders := make([]*leader, 5)
	for p := range leaders {
		leaders[p] = newLeader(1)
		leaders[p].open(t, conn, Options{})
	}
	srv.Stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for _, l := range leaders {
		l.waitDown(t, promptly())
	}
	select {
	case err := <-broken:
		if err == nil {
			t.Fatal("a break told without its cause")
		}
	case <-time.After(promptly()):
		t.Fatal("the broken session was not told")
	}

	// A new session, closed with the Conn.
	ln2, err := net.Listen("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv2 := NewServer(&recorder{}, Options{})
	go srv2.Serve(ln2)
	t.Cleanup(srv2.Stop)
	l := newLeader(1)
	eventually(t, 10*time.Second, "an Open on the same Conn after the session broke", func() bool {
		_, err = Open(context.Background(), conn, Options{}, l.onFrame, l.onDown)
		return err == nil
	})
	conn.Close()
	l.waitDown(t, promptly())
	select {
	case err := <-broken:
		t.Fatalf("told of a break %v: once for five streams, never for Close", err)
	default:
	}
}

// A leader learns from the follower's heartbeats whether it takes frames of
// writes: this version's server says so; a follower of an older version,
// whose heartbeats do not, is never sent them (the replica actor sends it
// single writes).
func TestSessionLearnsWhetherTheFollowerTakesFrames(t *testing.T) {
	_, addr := startServer(t, &recorder{}, Options{})
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{})
	if err := s.Send(writeFrame(1, 16)); err != nil {
		t.Fatal(err)
	}
	l.nextAck(t) // the server's first heartbeat came before it
	if !s.TakesFrames() {
		t.Fatal("a follower of this version not known to take frames")
	}

	old := oldFollower(t)
	l = newLeader(1)
	s = l.open(t, dial(t, old), Options{})
	if err := s.Send(writeFrame(2, 16)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetLogId() != 2 {
		t.Fatalf("ack %v from the old follower", a)
	}
	if s.TakesFrames() {
		t.Fatal("a follower whose heartbeats do not say so taken to take frames")
	}
}

// oldFollower serves one leader session as a follower that knows nothing of
// frames of writes would: it heartbeats without saying it takes them, and
// acks single writes.
func oldFollower(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if readPreface(c) != nil {
			return
		}
		w := newFrameWriter(c)
		send := func(f *messages.FollowerFrame) bool { return w.write(f) == nil && w.flush() == nil }
		if !send(&messages.FollowerFrame{Body: &messages.FollowerFrame_Heartbeat{Heartbeat: heartbeat("old")}}) {
			return
		}
		r := newFrameReader(c)
		for {
			f := new(messages.LeaderFrame)
			if r.read(f) != nil {
				return
			}
			if wr := f.GetWrite(); wr != nil {
				ack := &messages.ReplicaAck{Topic: wr.GetTopic(), Partition: wr.GetPartition(), LogId: wr.GetRecord().GetLogId()}
				if !send(&messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: ack}}) {
					return
				}
			}
		}
	}()
	return ln.Addr().String()
}

// An Open that finds the follower's node unreachable says when to try
// again: the connection goes on dialling the node (once for all its
// streams), and once a session is up the wait ends and an Open succeeds.
func TestUnreachableNodeFoundBackByOneDial(t *testing.T) {
	addr := freedAddr(t)
	conn := dial(t, addr)
	_, err := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {})
	var u *Unreachable
	if !errors.As(err, &u) {
		t.Fatalf("Open with nothing listening: %v, want Unreachable", err)
	}
	foundBack(t, addr, u)
	if !conn.Up() {
		t.Fatal("reachable, but no session is up")
	}
	l := newLeader(1)
	l.open(t, conn, Options{})
}

// OutOfReach says nothing of a node never dialled, and nothing while a
// session is up; once a dial failed it reports the node out of reach at
// once, whose Reachable ends when the connection's own dialling finds the
// node back, and then it says nothing again.
func TestOutOfReachOnlyAfterADialFailed(t *testing.T) {
	addr := freedAddr(t)
	conn := dial(t, addr)
	if u := conn.OutOfReach(Options{}); u != nil {
		t.Fatalf("a node never dialled reported out of reach: %v", u)
	}
	if _, err := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {}); err == nil {
		t.Fatal("Open succeeded with nothing listening")
	}
	u := conn.OutOfReach(Options{})
	if u == nil {
		t.Fatal("a node whose dial failed was not reported out of reach")
	}
	foundBack(t, addr, u)
	if u := conn.OutOfReach(Options{}); u != nil {
		t.Fatalf("reported out of reach with a session up: %v", u)
	}
}

// A failed dial is no news once it is older than dialBackoff and nothing
// redials: the node may have come back meanwhile, and a replica actor
// told it is out of reach would drop its writes and count a live follower
// down.
func TestOutOfReachForgetsAnOldFailedDial(t *testing.T) {
	conn := dial(t, freedAddr(t))
	if _, err := conn.session(context.Background(), Options{}); err == nil {
		t.Fatal("a session dialled with nothing listening")
	}
	conn.mu.Lock()
	keeping := conn.keeping
	conn.mu.Unlock()
	if keeping {
		t.Fatal("a dial of the session alone started redialling")
	}
	conn.mu.Lock()
	failedAt := conn.failAt
	conn.failAt = failedAt.Add(-2 * dialBackoff)
	conn.mu.Unlock()
	if u := conn.OutOfReach(Options{}); u != nil {
		t.Fatalf("a dial that failed %v ago, with nothing redialling since, reported out of reach: %v", 2*dialBackoff, u)
	}
	conn.mu.Lock()
	conn.failAt = time.Now()
	conn.mu.Unlock()
	if u := conn.OutOfReach(Options{}); u == nil {
		t.Fatal("a node whose dial just failed was not reported out of reach")
	}
}

// foundBack checks that u waits while nothing listens at addr, then serves
// a follower there (until the test ends) and waits for u to end.
func foundBack(t *testing.T, addr string, u *Unreachable) {
	t.Helper()
	select {
	case <-u.Reachable().Done():
		t.Fatal("reachable with nothing listening")
	default:
	}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(&recorder{}, Options{})
	served := make(chan error, 1)
	go func() { served <- s.Serve(back) }()
	t.Cleanup(func() { s.Stop(); <-served })
	select {
	case <-u.Reachable().Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the node was not found back")
	}
}

// Opens that waited for a dial the follower never answered all get its
// failure, however late each runs after it: one connection for all. The
// backoff is cut to nothing, so any that redialled would do so at once.
func TestOpensWaitingForAFailedDialShareItsFailure(t *testing.T) {
	var mu sync.Mutex
	var from []string // remote addresses, in the order accepted
	addr := acceptingServer(t, func(c net.Conn) error {
		mu.Lock()
		defer mu.Unlock()
		from = append(from, c.RemoteAddr().String())
		return nil
	})
	conn := dial(t, addr)
	conn.backoff = time.Nanosecond
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Go(func() {
			_, err := conn.session(context.Background(), Options{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil {
			t.Fatal("a session came up with a follower that never answers")
		}
	}
	// The server accepts in the order connections arrived: once a marker
	// dialled after every open is accepted, so is every dial they made.
	marker, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer marker.Close()
	eventually(t, promptly(), "the marker connection accepted", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(from, marker.LocalAddr().String())
	})
	mu.Lock()
	defer mu.Unlock()
	if n := len(from) - 1; n != 1 {
		t.Fatalf("%d connections for 100 opens waiting for one failed dial, want 1", n)
	}
}

// A session that goes silent is a failed dial for the streams that were on
// it: reopened at once, they are told the node is out of reach instead of
// each waiting connectTimeout on a connection that a stopped process's
// kernel accepts and nothing answers; the connection's own dialling finds
// the node back when it answers again.
func TestSilentSessionLeavesTheNodeOutOfReach(t *testing.T) {
	var answering atomic.Bool
	answering.Store(true)
	addr := acceptingServer(t, func(c net.Conn) error {
		if answering.Load() {
			answering.Store(false) // the first session only, then stopped
			return answer(c)
		}
		return nil
	})
	opt := Options{Heartbeat: 50 * time.Millisecond, DownAfter: 300 * time.Millisecond}
	conn := dial(t, addr)
	l := newLeader(1)
	l.open(t, conn, opt)
	if err := l.waitDown(t, 10*time.Second); !errors.Is(err, ErrSilent) {
		t.Fatalf("down with %v, want ErrSilent", err)
	}
	u := conn.OutOfReach(opt)
	if u == nil {
		t.Fatal("a node whose session went silent was not reported out of reach")
	}
	select {
	case <-u.Reachable().Done():
		t.Fatal("reachable while the node answers nothing")
	default:
	}
	answering.Store(true)
	select {
	case <-u.Reachable().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node was not found back once it answered")
	}
	l2 := newLeader(1)
	l2.open(t, conn, opt)
}
