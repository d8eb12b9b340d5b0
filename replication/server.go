package replication

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/messages"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
)

// Applier is the follower node's side of the write flow: it hands each frame
// to the local partition.
type Applier interface {
	// ApplyWrite gives a leader write to the local partition; reply is
	// called exactly once, from any goroutine, with the ack. Writes of one
	// stream arrive in order and must be handed over in order.
	ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck))
	// ApplyOffset gives a channel offset to the local partition; reply is
	// nil unless the update asks for an acknowledgement (SyncId != 0), and
	// is then called exactly once.
	ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck))
}

// Server is a node's replication service: it accepts its leaders' streams.
type Server struct {
	applier Applier
	opt     Options
	optErr  error
	grpc    *grpc.Server
	streams sync.WaitGroup // goroutines of open streams, so Stop can wait for them
}

// NewServer makes a Server; invalid options are reported by Serve.
func NewServer(a Applier, opt Options) *Server {
	opt, err := opt.withDefaults()
	if err == nil && a == nil {
		err = errors.New("replication: server without an applier")
	}
	s := &Server{applier: a, opt: opt, optErr: err}
	creds := []grpc.ServerOption{}
	if opt.TLS != nil {
		creds = append(creds, grpc.Creds(opt.TLS.serverCredentials()))
	}
	s.grpc = grpc.NewServer(append(creds,
		grpc.MaxRecvMsgSize(maxFrameSize),
		grpc.MaxSendMsgSize(maxFrameSize),
		// Streams have their own heartbeats; these pings drop connections
		// of dead leaders that have no stream open.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 2 * time.Second, Timeout: time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WaitForHandlers(true),
	)...)
	s.grpc.RegisterService(&serviceDesc, s)
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
	return s.grpc.Serve(ln)
}

// Stop closes every connection and stream at once, so each leader sees its
// stream break instead of waiting for heartbeats to stop. When it returns,
// the Applier is no longer called.
func (s *Server) Stop() {
	s.grpc.Stop()
	s.streams.Wait()
}

// serverStream is one leader's stream to this node.
type serverStream struct {
	srv   *Server
	gs    grpc.ServerStream
	acks  ackQueue
	done  chan struct{} // closed when the handler returns
	ended atomic.Bool
}

func (s *Server) serveStream(gs grpc.ServerStream) error {
	st := &serverStream{srv: s, gs: gs, acks: ackQueue{ready: make(chan struct{}, 1)}, done: make(chan struct{})}
	end := make(chan error, 1)
	finish := func(err error) {
		select {
		case end <- err:
		default:
		}
	}
	dog := startWatchdog(s.opt.DownAfter, func(idle time.Duration) {
		finish(status.Errorf(codes.Unavailable, "replication: nothing from the leader for %v", idle.Round(time.Millisecond)))
	})
	s.streams.Add(2)
	go st.receive(dog, finish)
	go st.send(finish)

	var err error
	select {
	case err = <-end:
	case <-gs.Context().Done():
		err = status.FromContextError(gs.Context().Err()).Err()
	}
	dog.stop()
	st.ended.Store(true)
	close(st.done)
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// receive runs until the stream breaks; the receive goroutine blocked in
// RecvMsg is released when the handler returns and grpc cancels the stream.
func (st *serverStream) receive(dog *watchdog, finish func(error)) {
	defer st.srv.streams.Done()
	for {
		f := new(messages.LeaderFrame)
		if err := st.gs.RecvMsg(f); err != nil {
			finish(err)
			return
		}
		dog.touch()
		if st.ended.Load() {
			return
		}
		st.handle(f)
	}
}

func (st *serverStream) handle(f *messages.LeaderFrame) {
	switch b := f.GetBody().(type) {
	case *messages.LeaderFrame_Batch:
		for _, inner := range b.Batch.GetFrames() {
			if inner.GetBatch() == nil {
				st.handle(inner)
			}
		}
	case *messages.LeaderFrame_Write:
		if err := checkWrite(b.Write); err != nil {
			st.acks.push(refusal(b.Write, err))
			return
		}
		st.srv.applier.ApplyWrite(b.Write, st.replyOnce())
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
		st.acks.push(a)
	}
}

// send is the stream's only sender: grpc forbids concurrent SendMsg, and
// acks come from whatever goroutine the partition replies on.
func (st *serverStream) send(finish func(error)) {
	defer st.srv.streams.Done()
	tick := time.NewTicker(st.srv.opt.Heartbeat)
	defer tick.Stop()
	beat := func() error {
		return st.gs.SendMsg(&messages.FollowerFrame{Body: &messages.FollowerFrame_Heartbeat{Heartbeat: heartbeat(st.srv.opt.NodeID)}})
	}
	if err := beat(); err != nil {
		finish(err)
		return
	}
	for {
		select {
		case <-st.done:
			return
		case <-tick.C:
			if err := beat(); err != nil {
				finish(err)
				return
			}
		case <-st.acks.ready:
			acks := st.acks.take()
			frames := make([]*messages.FollowerFrame, len(acks))
			for i, a := range acks {
				frames[i] = &messages.FollowerFrame{Body: &messages.FollowerFrame_Ack{Ack: a}}
			}
			for _, f := range batched(frames, followerBatch) {
				if err := st.gs.SendMsg(f); err != nil {
					finish(err)
					return
				}
			}
		}
	}
}

// ackQueue never blocks the goroutine that replies: acks wait here for the
// sender, however slowly the leader reads.
type ackQueue struct {
	mu    sync.Mutex
	acks  []*messages.ReplicaAck
	ready chan struct{} // holds a token while acks is not empty
}

func (q *ackQueue) push(a *messages.ReplicaAck) {
	q.mu.Lock()
	q.acks = append(q.acks, a)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

func (q *ackQueue) take() []*messages.ReplicaAck {
	q.mu.Lock()
	defer q.mu.Unlock()
	a := q.acks
	q.acks = nil
	return a
}
