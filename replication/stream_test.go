package replication

import (
	"context"
	"errors"
	"net"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testcert"
	"github.com/partitamq/partita/messages"
)

func TestIdleStreamStaysUp(t *testing.T) {
	opt := Options{Heartbeat: 40 * time.Millisecond, DownAfter: 200 * time.Millisecond}
	_, addr := startServer(t, &recorder{}, opt)
	l := newLeader(1)
	s := l.open(t, dial(t, addr), opt)
	// Without heartbeats either end would give up after DownAfter.
	select {
	case err := <-l.down:
		t.Fatalf("idle stream went down: %v", err)
	case <-time.After(10 * opt.DownAfter):
	}
	if err := s.Send(writeFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetLogId() != 1 {
		t.Fatalf("ack %v", a)
	}
}

// answer is what a follower does first: a heartbeat, which tells the
// leader that the process behind the port is alive.
func answer(c net.Conn) error {
	w := newFrameWriter(c)
	if err := w.write(&messages.FollowerFrame{Body: &messages.FollowerFrame_Heartbeat{Heartbeat: heartbeat("follower")}}); err != nil {
		return err
	}
	return w.flush()
}

// silentServer accepts sessions, answers each once as a follower does,
// then says nothing more.
func silentServer(t *testing.T) string {
	t.Helper()
	return acceptingServer(t, answer)
}

// acceptingServer accepts connections, does greet on each and keeps them
// open until the test ends.
func acceptingServer(t *testing.T, greet func(net.Conn) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			greet(c)
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-accepted
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestSilentFollowerReportedDown(t *testing.T) {
	opt := Options{} // the defaults must meet the 1s requirement
	l := newLeader(1)
	start := time.Now()
	s := l.open(t, dial(t, silentServer(t)), opt)
	err := l.waitDown(t, 10*time.Second)
	elapsed := time.Since(start)
	if !errors.Is(err, ErrSilent) {
		t.Fatalf("down with %v, want ErrSilent", err)
	}
	if elapsed < 3*defaultHeartbeat {
		t.Fatalf("down after %v, before DownAfter", elapsed)
	}
	if !raceEnabled && elapsed >= time.Second {
		t.Fatalf("down after %v, want under 1s", elapsed)
	}
	t.Logf("silent follower reported down after %v", elapsed)
	if err := s.Send(writeFrame(1, 8)); !errors.Is(err, ErrSilent) {
		t.Fatalf("Send after down: %v, want ErrSilent", err)
	}
}

func TestStreamGoesDownAtOnce(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T) (context.Context, string, func())
		check func(error) bool
	}{
		{"peer hangs up", func(t *testing.T) (context.Context, string, func()) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			accepted := make(chan net.Conn, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					close(accepted)
					return
				}
				answer(c)
				accepted <- c
			}()
			hangUp := func() {
				c, ok := <-accepted
				if !ok {
					t.Error("nothing connected")
					return
				}
				c.Close()
			}
			return context.Background(), ln.Addr().String(), hangUp
		}, func(err error) bool { return err != nil && !errors.Is(err, ErrSilent) }},
		{"caller's context cancelled", func(t *testing.T) (context.Context, string, func()) {
			_, addr := startServer(t, &recorder{}, Options{})
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			return ctx, addr, cancel
		}, func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"server stopped", func(t *testing.T) (context.Context, string, func()) {
			srv, addr := startServer(t, &recorder{}, Options{})
			return context.Background(), addr, srv.Stop
		}, func(err error) bool { return !errors.Is(err, ErrSilent) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, addr, breakIt := tc.setup(t)
			l := newLeader(1)
			s, err := Open(ctx, dial(t, addr), Options{}, l.onFrame, l.onDown)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			breakIt()
			err = l.waitDown(t, promptly())
			if !tc.check(err) {
				t.Fatalf("down with %v", err)
			}
			if err := s.Send(writeFrame(1, 8)); err == nil {
				t.Fatal("Send after down succeeded")
			}
		})
	}
}

func TestOpenFailsWithoutAFollower(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	l := newLeader(1)
	if _, err := Open(context.Background(), dial(t, addr), Options{}, l.onFrame, l.onDown); err == nil {
		t.Fatal("Open succeeded with nothing listening")
	}
	if len(l.down) != 0 {
		t.Fatal("onDown called for a stream that never opened")
	}
}

// A follower that accepts the connection but never completes the TLS
// handshake does not hold Open past the connect timeout.
func TestOpenGivesUpOnAStuckHandshake(t *testing.T) {
	cluster := testcert.NewCA(t, "cluster")
	addr := silentServer(t)
	conn, err := DialTLS(addr, tlsOf(t, cluster, cluster, "leader"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := Open(context.Background(), conn, Options{}, func(*messages.FollowerFrame, bool) {}, func(error) {}); err == nil {
		t.Fatal("Open succeeded without a handshake")
	}
	if elapsed := time.Since(start); elapsed > connectTimeout+promptly() {
		t.Fatalf("Open gave up after %v, connect timeout is %v", elapsed, connectTimeout)
	}
}

func TestCloseDoesNotReportDown(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{})
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{})
	if err := s.Send(writeFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	l.nextAck(t)
	s.Close()
	s.Close()
	if err := s.Send(writeFrame(2, 8)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v, want ErrClosed", err)
	}
	select {
	case err := <-l.down:
		t.Fatalf("onDown after Close: %v", err)
	case <-time.After(3 * defaultHeartbeat):
	}
}

func TestSendRefusesEmptyFrames(t *testing.T) {
	_, addr := startServer(t, &recorder{}, Options{})
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{})
	for _, f := range []*messages.LeaderFrame{nil, {}} {
		if err := s.Send(f); err == nil {
			t.Fatalf("Send(%v) succeeded", f)
		}
	}
	if err := s.Send(writeFrame(1, 8)); err != nil {
		t.Fatalf("stream broken by a refused frame: %v", err)
	}
	l.nextAck(t)
}

func TestOpenArguments(t *testing.T) {
	_, addr := startServer(t, &recorder{}, Options{})
	conn := dial(t, addr)
	noFrame, noDown := func(*messages.FollowerFrame, bool) {}, func(error) {}
	if _, err := Open(context.Background(), nil, Options{}, noFrame, noDown); err == nil {
		t.Fatal("Open without a connection")
	}
	if _, err := Open(context.Background(), conn, Options{}, nil, noDown); err == nil {
		t.Fatal("Open without onFrame")
	}
	if _, err := Open(context.Background(), conn, Options{}, noFrame, nil); err == nil {
		t.Fatal("Open without onDown")
	}
}

func TestNoGoroutinesLeft(t *testing.T) {
	// Warm up lazily started global goroutines (the runtime's timers and
	// netpoller), if any.
	roundTrip(t, 1)
	base := runtime.NumGoroutine()
	roundTrip(t, 4)
	eventually(t, 10*time.Second, "goroutines back to baseline", func() bool {
		return runtime.NumGoroutine() <= base
	})
}

// roundTrip runs a server and n streams through a write each, then closes
// half the streams, stops the server under the rest and closes everything.
func roundTrip(t *testing.T, n int) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(&recorder{async: true}, Options{})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	conn, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	var streams []*Stream
	var leaders []*leader
	for i := range n {
		l := newLeader(1)
		s, err := Open(context.Background(), conn, Options{}, l.onFrame, l.onDown)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(writeFrame(int64(i), 8)); err != nil {
			t.Fatal(err)
		}
		l.nextAck(t)
		streams, leaders = append(streams, s), append(leaders, l)
	}
	for _, s := range streams[:n/2] {
		s.Close()
	}
	srv.Stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	for _, l := range leaders[n/2:] {
		l.waitDown(t, promptly())
	}
	for _, s := range streams[n/2:] {
		s.Close()
	}
	conn.Close()
}

func BenchmarkStreamRoundTrip(b *testing.B) {
	_, addr := startServer(b, acker{}, Options{})
	const outstanding = 1000
	l := newLeader(outstanding)
	s := l.open(b, dial(b, addr), Options{})
	frame := writeFrame(1, 200)
	inFlight := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if inFlight == outstanding {
			l.nextAck(b)
			inFlight--
		}
		if err := s.Send(frame); err != nil {
			b.Fatal(err)
		}
		inFlight++
	}
	for ; inFlight > 0; inFlight-- {
		l.nextAck(b)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
}

// acker acks every write and keeps nothing, so the benchmark measures the
// transport rather than the garbage collector.
type acker struct{}

func (acker) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	reply(&messages.ReplicaAck{Topic: w.GetTopic(), Partition: w.GetPartition(), LogId: w.GetRecord().GetLogId()})
}
func (acker) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	w := ws[len(ws)-1]
	reply([]*messages.ReplicaAck{{Topic: w.GetTopic(), Partition: w.GetPartition(), LogId: w.GetRecord().GetLogId()}})
}
func (acker) ApplyOffset(*messages.ChannelOffsetUpdate, func(*messages.ReplicaAck)) {}

// Frames sent with SendNow are written from the sending goroutine when the
// session's sender is idle, and left to it when the socket is full or the
// sender busy: the follower stops applying after the first frame, so the
// socket fills and a write goes in part; sent from several goroutines,
// mixed with Send, every write is still applied once, each partition's in
// order.
func TestSendNowMixedWithSendKeepsEveryFrameInOrder(t *testing.T) {
	gate := make(chan struct{})
	rec := &gatedRecorder{gate: gate}
	_, addr := startServer(t, rec, Options{NodeID: "follower", DownAfter: time.Minute})
	const senders, each = 4, 100
	l := newLeader(senders*each + 300)
	conn := dial(t, addr)
	// No heartbeat meanwhile: the sender stays idle until SendNow leaves it
	// something to write.
	opt := Options{NodeID: "leader", Heartbeat: time.Minute, DownAfter: 2 * time.Minute}
	first := l.open(t, conn, opt)
	// A first frame, answered: the session's sender is up and idle.
	w0 := writeFrame(1, 16).GetWrite()
	w0.Partition = senders
	if err := first.SendNow(writesFrame(w0)); err != nil {
		t.Fatal(err)
	}
	l.nextAck(t)
	// More than the sockets hold, from one goroutine: one of these writes
	// goes in part, and the sender writes the rest.
	const filling = 256
	for i := range filling {
		w := writeFrame(int64(i+2), 64<<10).GetWrite()
		w.Partition = senders
		if err := first.SendNow(writesFrame(w)); err != nil {
			t.Fatal(err)
		}
	}
	streams := make([]*Stream, senders)
	for i := range streams {
		streams[i] = l.open(t, conn, opt)
	}
	var wg sync.WaitGroup
	for g, s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				w := writeFrame(int64(i+1), 64<<10).GetWrite()
				w.Partition = int32(g)
				f := writesFrame(w)
				var err error
				if g > 0 && i%3 == 0 {
					err = s.Send(f)
				} else {
					err = s.SendNow(f)
				}
				if err != nil {
					t.Errorf("send %d of %d: %v", i, g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(gate)
	for range senders*each + filling {
		l.nextAck(t)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	next := make([]int64, senders+1)
	for _, w := range rec.writes {
		p := w.GetPartition()
		if want := next[p] + 1; w.GetRecord().GetLogId() != want {
			t.Fatalf("partition %d applied %d after %d", p, w.GetRecord().GetLogId(), next[p])
		}
		next[p]++
	}
	for p, n := range next[:senders] {
		if n != each {
			t.Fatalf("partition %d: %d writes applied, want %d", p, n, each)
		}
	}
	if next[senders] != filling+1 {
		t.Fatalf("%d writes of the first stream applied, want %d", next[senders], filling+1)
	}
}

// gatedRecorder is a recorder that applies the first frame of writes at
// once and the others only after gate closes.
type gatedRecorder struct {
	recorder
	gate   chan struct{}
	frames atomic.Int64
}

func (g *gatedRecorder) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	if g.frames.Add(1) > 1 {
		<-g.gate
	}
	g.recorder.ApplyWrites(ws, reply)
}

// A port that accepts but whose process never answers (a follower paused
// with SIGSTOP: its kernel still completes the handshake) opens no
// session: the open fails within the connect timeout instead of bringing
// every stream up for the watchdog to take down again.
func TestUnansweredConnectionOpensNoSession(t *testing.T) {
	addr := acceptingServer(t, func(net.Conn) error { return nil }) // and never a word
	l := newLeader(1)
	start := time.Now()
	s, err := Open(context.Background(), dial(t, addr), Options{}, l.onFrame, l.onDown)
	if err == nil {
		s.Close()
		t.Fatal("a session opened on a connection nobody answered")
	}
	if !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("open failed with %v, want the follower's silence named", err)
	}
	if took := time.Since(start); !raceEnabled && took > connectTimeout+promptly() {
		t.Errorf("the open took %v to fail, connect timeout %v", took, connectTimeout)
	}
}

// A leader whose reader is held up (its goroutine waiting for a core on a
// saturated machine, or busy with what it read) while the follower goes
// on sending heartbeats does not call the follower silent: the bytes
// waiting in the socket say it is alive. Once the reader runs again the
// stream goes on.
func TestHeldUpReaderIsNotSilence(t *testing.T) {
	opt := Options{Heartbeat: 20 * time.Millisecond, DownAfter: 100 * time.Millisecond}
	_, addr := startServer(t, &recorder{}, opt)
	release := make(chan struct{})
	acks := make(chan *messages.ReplicaAck, 10)
	down := make(chan error, 1)
	held := false
	s, err := Open(context.Background(), dial(t, addr), opt, func(f *messages.FollowerFrame, _ bool) {
		if !held {
			held = true
			<-release // the reader waits here, reading nothing
		}
		acks <- f.GetAck()
	}, func(err error) { down <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Send(writeFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-down:
		t.Fatalf("the stream went down while the follower was sending: %v", err)
	case <-time.After(10 * opt.DownAfter):
	}
	close(release)
	if err := s.Send(writeFrame(2, 8)); err != nil {
		t.Fatal(err)
	}
	for want := int64(1); want <= 2; want++ {
		select {
		case a := <-acks:
			if a.GetLogId() != want {
				t.Fatalf("ack %v, want log ID %d", a, want)
			}
		case err := <-down:
			t.Fatalf("the stream went down after the reader ran again: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatalf("no ack of log ID %d", want)
		}
	}
}

// OpenUp opens a stream only on a session that is up: never a dial of its
// own, nothing before the first Open or after the session broke.
func TestOpenUpOnlyOnALiveSession(t *testing.T) {
	srv, addr := startServer(t, &recorder{}, Options{})
	conn := dial(t, addr)
	l := newLeader(1)
	if s := OpenUp(context.Background(), conn, l.onFrame, l.onDown); s != nil {
		t.Fatal("OpenUp opened a stream before any session")
	}
	if conn.Up() {
		t.Fatal("OpenUp dialled a session")
	}
	l.open(t, conn, Options{})

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := newLeader(1)
	s := OpenUp(ctx, conn, up.onFrame, up.onDown)
	if s == nil {
		t.Fatal("OpenUp opened nothing on a session that is up")
	}
	if err := s.Send(writeFrame(5, 8)); err != nil {
		t.Fatal(err)
	}
	if a := up.nextAck(t); a.GetLogId() != 5 {
		t.Fatalf("ack %v, want of write 5", a)
	}
	cancel()
	if err := up.waitDown(t, promptly()); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream down with %v after its context ended, want context.Canceled", err)
	}

	srv.Stop()
	l.waitDown(t, promptly())
	eventually(t, promptly(), "the session seen down", func() bool { return !conn.Up() })
	if s := OpenUp(context.Background(), conn, l.onFrame, l.onDown); s != nil {
		t.Fatal("OpenUp opened a stream on a broken session")
	}
}

func offsetFrame(offset int64) *messages.LeaderFrame {
	return &messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{
		Topic: "orders", Partition: 2, Channel: "c", VOffset: offset,
	}}}
}

// A frame sent for later leaves with the session's next write, of any
// partition's stream, ahead of it: with no heartbeat meanwhile, the
// follower has applied it by the time it answers the write that followed.
func TestSendLaterRidesOnTheNextWrite(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{NodeID: "follower", DownAfter: time.Minute})
	l := newLeader(4)
	conn := dial(t, addr)
	opt := Options{NodeID: "leader", Heartbeat: time.Minute, DownAfter: 2 * time.Minute}
	offsets, writes := l.open(t, conn, opt), l.open(t, conn, opt)
	if err := offsets.SendLater(offsetFrame(5)); err != nil {
		t.Fatal(err)
	}
	if err := writes.SendNow(writeFrame(1, 16)); err != nil {
		t.Fatal(err)
	}
	l.nextAck(t)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.offsets) != 1 || rec.offsets[0].GetVOffset() != 5 {
		t.Fatalf("offsets applied before the write's answer: %v", rec.offsets)
	}
}

// With nothing else to write, a frame sent for later leaves with the next
// heartbeat.
func TestSendLaterLeavesWithTheHeartbeat(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{NodeID: "follower"})
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{NodeID: "leader", Heartbeat: 20 * time.Millisecond})
	if err := s.SendLater(offsetFrame(9)); err != nil {
		t.Fatal(err)
	}
	eventually(t, promptly(), "the offset applied", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.offsets) == 1
	})
}

// A frame pushed for later does not wake the sender; one pushed as usual
// does, and takes the first along.
func TestOutboxPushLaterWakesNoOne(t *testing.T) {
	o := newOutbox[int]()
	o.pushLater(1)
	if len(o.ready) != 0 {
		t.Fatal("pushLater woke the sender")
	}
	o.push(2)
	if len(o.ready) != 1 {
		t.Fatal("push did not wake the sender")
	}
	if got := o.take(); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("the sender took %v, want [1 2]", got)
	}
}
