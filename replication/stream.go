package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/messages"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
)

// Dial makes a connection to a follower node's replication service; streams
// of many partitions share it. It connects lazily, on the first Open.
func Dial(addr string) (*grpc.ClientConn, error) {
	return DialTLS(addr, nil)
}

// DialTLS is Dial over mutual TLS; a nil t dials in plain text.
func DialTLS(addr string, t *TLS) (*grpc.ClientConn, error) {
	if addr == "" {
		return nil, errors.New("replication: dial without an address")
	}
	creds := insecure.NewCredentials()
	if t != nil {
		creds = t.clientCredentials()
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxFrameSize), grpc.MaxCallSendMsgSize(maxFrameSize)),
		// Stream heartbeats catch a silent follower; keepalive (10s is
		// grpc's floor) also drops a connection to a dead TCP peer that no
		// stream uses, and its Timeout becomes TCP_USER_TIMEOUT, so data
		// left unacknowledged on a vanished host fails the connection.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 2 * time.Second, PermitWithoutStream: true}),
		// A restarted follower is back within seconds, not after grpc's
		// default 2-minute backoff ceiling.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("replication: dial %s: %w", addr, err)
	}
	return conn, nil
}

// Stream is a leader's stream to one follower for one partition.
type Stream struct {
	opt     Options
	cs      grpc.ClientStream
	ctx     context.Context
	cancel  context.CancelCauseFunc
	dog     *watchdog
	onFrame func(*messages.FollowerFrame)
	onDown  func(error)
	closed  atomic.Bool
	sendMu  sync.Mutex // the heartbeat goroutine sends too

	// Frames wait here for the sender goroutine, so the caller (a replica
	// actor) never waits on the network and bursts go out back to back.
	outMu    sync.Mutex
	out      []*messages.LeaderFrame
	outReady chan struct{}
}

// Open starts a stream on conn. ctx bounds the stream's whole life:
// cancelling it takes the stream down like a broken connection.
//
// onFrame gets every frame from the follower except heartbeats, which the
// stream consumes. onDown gets why the stream went down: a stream error at
// once, ErrEnded when the follower ended it, ErrSilent when nothing arrived
// for DownAfter. Both run on the stream's receive goroutine, one at a time,
// and neither runs after onDown; onDown runs at most once, and not at all
// after Close.
func Open(ctx context.Context, conn *grpc.ClientConn, opt Options, onFrame func(*messages.FollowerFrame), onDown func(error)) (*Stream, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if conn == nil || onFrame == nil || onDown == nil {
		return nil, errors.New("replication: open needs a connection, onFrame and onDown")
	}
	sctx, cancel := context.WithCancelCause(ctx)
	cs, err := conn.NewStream(sctx, &serviceDesc.Streams[0], streamMethod)
	if err != nil {
		cancel(err)
		return nil, fmt.Errorf("replication: open stream: %w", err)
	}
	s := &Stream{opt: opt, cs: cs, ctx: sctx, cancel: cancel, onFrame: onFrame, onDown: onDown, outReady: make(chan struct{}, 1)}
	s.dog = startWatchdog(opt.DownAfter, func(idle time.Duration) {
		cancel(fmt.Errorf("%w: nothing for %v", ErrSilent, idle.Round(time.Millisecond)))
	})
	go s.receive()
	go s.beat()
	go s.send()
	return s, nil
}

// Send queues f for the stream's sender goroutine and returns at once; it
// fails once the stream is down or closed. A frame queued when the stream
// breaks is lost with it: the owner hears of that through onDown.
func (s *Stream) Send(f *messages.LeaderFrame) error {
	if f.GetBody() == nil {
		return errors.New("replication: send of an empty frame")
	}
	if err := s.downErr(); err != nil {
		return err
	}
	s.outMu.Lock()
	s.out = append(s.out, f)
	s.outMu.Unlock()
	select {
	case s.outReady <- struct{}{}:
	default:
	}
	return nil
}

// send writes queued frames in order until the stream ends; a failed write
// takes the stream down, which the receive goroutine reports.
func (s *Stream) send() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.outReady:
		}
		s.outMu.Lock()
		frames := s.out
		s.out = nil
		s.outMu.Unlock()
		for _, f := range batched(frames, leaderBatch) {
			s.sendMu.Lock()
			err := s.cs.SendMsg(f)
			s.sendMu.Unlock()
			if err != nil {
				s.cancel(fmt.Errorf("%w: %w", ErrEnded, err))
				return
			}
		}
	}
}

// Close ends the stream without calling onDown. It does not wait for a
// callback already running, so it may be called from one.
func (s *Stream) Close() {
	s.closed.Store(true)
	s.cancel(ErrClosed)
	s.dog.stop()
}

func (s *Stream) downErr() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

func (s *Stream) receive() {
	for {
		f := new(messages.FollowerFrame)
		if err := s.cs.RecvMsg(f); err != nil {
			s.down(err)
			return
		}
		s.dog.touch()
		if s.closed.Load() {
			return
		}
		if b := f.GetBatch(); b != nil {
			for _, inner := range b.GetFrames() {
				if inner.GetAck() != nil {
					s.onFrame(inner)
				}
			}
			continue
		}
		if f.GetAck() == nil {
			continue // a heartbeat, or a kind only a newer follower knows
		}
		s.onFrame(f)
	}
}

func (s *Stream) down(err error) {
	switch {
	case s.ctx.Err() != nil:
		err = context.Cause(s.ctx) // silence, Close, or the caller's context
	case errors.Is(err, io.EOF):
		err = ErrEnded
	default:
		err = fmt.Errorf("replication: stream: %w", err)
	}
	s.cancel(err)
	s.dog.stop()
	if !s.closed.Load() {
		s.onDown(err)
	}
}

// beat sends a heartbeat every Options.Heartbeat until the stream is down;
// the first one goes out at once so the follower hears from a new stream.
func (s *Stream) beat() {
	tick := time.NewTicker(s.opt.Heartbeat)
	defer tick.Stop()
	for {
		s.sendMu.Lock()
		err := s.cs.SendMsg(&messages.LeaderFrame{Body: &messages.LeaderFrame_Heartbeat{Heartbeat: heartbeat(s.opt.NodeID)}})
		s.sendMu.Unlock()
		if err != nil {
			return // the receive goroutine reports why
		}
		select {
		case <-tick.C:
		case <-s.ctx.Done():
			return
		}
	}
}
