package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/partitamq/partita/internal/rawio"
	"github.com/partitamq/partita/messages"
)

// Applier is the follower node's side of the write flow: it hands each frame
// to the local partition.
type Applier interface {
	// ApplyWrite gives a leader write to the local partition; reply is
	// called exactly once, from any goroutine, with the ack. Writes of one
	// partition arrive in order and must be handed over in order. It is
	// called on the session's receive goroutine, which carries every
	// partition the two nodes share, so it must not wait on one partition.
	ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck))
	// ApplyWrites gives a frame of consecutive writes of one partition to
	// the local partition, as ApplyWrite does one; reply is called exactly
	// once with the frame's acks in log order, where a success ack covers
	// the writes before it.
	ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck))
	// ApplyOffset gives a channel offset to the local partition; reply is
	// nil unless the update asks for an acknowledgement (SyncId != 0), and
	// is then called exactly once.
	ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck))
}

// HereApplier is an Applier that can apply a frame on the caller's
// goroutine: the server's reader calls ApplyWritesHere instead of
// ApplyWrites when it has nothing more to read, so would sleep next. An
// idle partition's turn then runs before it returns, and its ack is
// written from there: a frame costs the follower one wake-up, not one per
// goroutine on the way.
type HereApplier interface {
	ApplyWritesHere(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck))
}

// Server is a node's replication service: it accepts its leaders'
// sessions, one TCP connection per leader node, each carrying the frames of
// every partition that node leads and this one follows.
type Server struct {
	applier Applier
	opt     Options
	optErr  error
	tls     *tls.Config

	mu      sync.Mutex
	ln      net.Listener
	conns   map[net.Conn]struct{}
	stopped bool
	streams sync.WaitGroup // goroutines of open connections, so Stop can wait for them
}

// NewServer makes a Server; invalid options are reported by Serve.
func NewServer(a Applier, opt Options) *Server {
	opt, err := opt.withDefaults()
	if err == nil && a == nil {
		err = errors.New("replication: server without an applier")
	}
	s := &Server{applier: a, opt: opt, optErr: err, conns: map[net.Conn]struct{}{}}
	if opt.TLS != nil {
		s.tls = opt.TLS.serverConfig()
	}
	return s
}

// Serve accepts streams on ln until Stop; it returns nil once stopped.
func (s *Server) Serve(ln net.Listener) error {
	if s.optErr != nil {
		return s.optErr
	}
	if ln == nil {
		return errors.New("replication: serve without a listener")
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.ln = ln
	s.mu.Unlock()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.isStopped() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				// Out of file descriptors, say: wait, as net/http does,
				// rather than spin or give up the port.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return fmt.Errorf("replication: accept: %w", err)
		}
		backoff = 0
		if !s.track(c) {
			c.Close()
			return nil
		}
		go s.serveConn(c)
	}
}

func (s *Server) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.conns[c] = struct{}{}
	s.streams.Add(1)
	return true
}

// Stop closes the listener and every connection at once, so each leader
// sees its session break instead of waiting for heartbeats to stop. When it
// returns, the Applier is no longer called.
func (s *Server) Stop() {
	s.mu.Lock()
	s.stopped = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.streams.Wait()
}

// serveConn runs one leader's session: it checks the peer (TLS, preface)
// under a deadline, then receives frames on one goroutine and sends acks
// and heartbeats on this one until either side ends.
func (s *Server) serveConn(raw net.Conn) {
	defer s.streams.Done()
	defer func() {
		raw.Close()
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
	}()
	c := raw
	c.SetDeadline(time.Now().Add(connectTimeout))
	if s.tls != nil {
		tc := tls.Server(c, s.tls)
		if err := tc.Handshake(); err != nil {
			s.opt.Logger.Warn("replication connection refused: TLS handshake failed", "peer", raw.RemoteAddr().String(), "err", err)
			return
		}
		c = tc
	}
	if err := readPreface(c); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, io.EOF) {
			level = slog.LevelDebug // a port probe: connected, sent nothing
		}
		s.opt.Logger.Log(context.Background(), level, "replication connection refused", "peer", raw.RemoteAddr().String(), "err", err)
		return
	}
	c.SetDeadline(time.Time{})

	st := &serverStream{srv: s, out: newOutbox[*messages.FollowerFrame]()}
	// However the stream ends, closing the socket releases a send blocked
	// on a leader that stopped reading (paused, or its host gone).
	end := make(chan struct{})
	var once sync.Once
	finish := func() {
		once.Do(func() {
			close(end)
			c.Close()
		})
	}
	dog := startWatchdog(s.opt.DownAfter, unreadBytes(c), func(time.Duration) { finish() })
	received := make(chan struct{})
	go func() {
		defer close(received)
		st.receive(c, dog, finish)
	}()
	heartbeat := func() vtMessage {
		hb := heartbeat(s.opt.NodeID)
		hb.TakesFrames = true
		return &messages.FollowerFrame{Body: &messages.FollowerFrame_Heartbeat{Heartbeat: hb}}
	}
	sendFrames(c, s.opt.Heartbeat, heartbeat, st.out, func(f *messages.FollowerFrame) vtMessage { return f }, end)
	finish()
	dog.stop()
	st.ended.Store(true)
	<-received
}

// serverStream is one leader node's session to this node.
type serverStream struct {
	srv   *Server
	out   *outbox[*messages.FollowerFrame] // acks, after whatever goroutine the partition replies on
	ended atomic.Bool
}

func (st *serverStream) receive(c net.Conn, dog *watchdog, finish func()) {
	r := newFrameReader(rawio.Reader(c))
	for {
		f := new(messages.LeaderFrame)
		if err := r.read(f); err != nil {
			finish()
			return
		}
		dog.touch()
		if st.ended.Load() {
			return
		}
		if r.br.Buffered() > 0 {
			st.handle(f, false)
			continue
		}
		st.out.hold()
		st.handle(f, true)
		if st.out.release() {
			st.out.writeNow()
		}
	}
}

// handle gives f to the applier; last says the reader has nothing more to
// read, so a frame of writes is applied on its goroutine when the applier
// can (HereApplier).
func (st *serverStream) handle(f *messages.LeaderFrame, last bool) {
	switch b := f.GetBody().(type) {
	case *messages.LeaderFrame_Batch:
		for _, inner := range b.Batch.GetFrames() {
			if inner.GetBatch() == nil {
				st.handle(inner, false)
			}
		}
	case *messages.LeaderFrame_Write:
		if err := checkWrite(b.Write); err != nil {
			st.ack(refusal(b.Write, err))
			return
		}
		st.srv.applier.ApplyWrite(b.Write, st.replyOnce())
	case *messages.LeaderFrame_Writes:
		ws := b.Writes.GetWrites()
		if len(ws) == 0 {
			return // nothing to apply, and no write to answer for
		}
		if err := checkWrites(ws); err != nil {
			st.acks(refusals(ws, err))
			return
		}
		if ha, ok := st.srv.applier.(HereApplier); ok && last {
			ha.ApplyWritesHere(ws, st.replyAllOnce())
			return
		}
		st.srv.applier.ApplyWrites(ws, st.replyAllOnce())
	case *messages.LeaderFrame_Offset:
		// A bad update is dropped: offsets are synced again periodically.
		if checkOffset(b.Offset) == nil {
			var reply func(*messages.ReplicaAck)
			if b.Offset.GetSyncId() != 0 {
				reply = st.replyOnce()
			}
			st.srv.applier.ApplyOffset(b.Offset, reply)
		}
	}
	// Heartbeats only feed the watchdog; an empty body, or one only a newer
	// leader knows, has nothing to apply.
}

// replyOnce lets a misbehaving Applier answer twice without the leader
// seeing two acks for one write.
func (st *serverStream) replyOnce() func(*messages.ReplicaAck) {
	var replied atomic.Bool
	return func(a *messages.ReplicaAck) {
		if a == nil || st.ended.Load() || !replied.CompareAndSwap(false, true) {
			return
		}
		st.ack(a)
	}
}

// replyAllOnce is replyOnce for a frame of writes: one answer frame per
// frame, as the leader counts them.
func (st *serverStream) replyAllOnce() func([]*messages.ReplicaAck) {
	var replied atomic.Bool
	return func(acks []*messages.ReplicaAck) {
		if len(acks) == 0 || st.ended.Load() || !replied.CompareAndSwap(false, true) {
			return
		}
		st.acks(acks)
	}
}

func (st *serverStream) acks(acks []*messages.ReplicaAck) {
	st.out.push(&messages.FollowerFrame{Body: &messages.FollowerFrame_Acks{Acks: &messages.ReplicaAcks{Acks: acks}}})
}

func (st *serverStream) ack(a *messages.ReplicaAck) {
	st.out.push(&messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: a}})
}
