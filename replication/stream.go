package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/messages"
)

// connectTimeout bounds dialling a follower and the TLS handshake: a
// follower cut off by the network should fail the attempt, and the replica
// actor redials, rather than hang it.
const connectTimeout = time.Second

// Conn is where a leader's streams to one follower node go. Each stream is
// its own TCP connection, so a slow partition never queues behind another's
// frames and nothing is multiplexed in user space.
type Conn struct {
	addr string
	tls  *tls.Config

	mu      sync.Mutex
	streams map[*Stream]struct{}
	closed  bool
}

// Dial prepares streams to a follower node's replication service; nothing
// connects until Open.
func Dial(addr string) (*Conn, error) {
	return DialTLS(addr, nil)
}

// DialTLS is Dial over mutual TLS; a nil t dials in plain text.
func DialTLS(addr string, t *TLS) (*Conn, error) {
	if addr == "" {
		return nil, errors.New("replication: dial without an address")
	}
	c := &Conn{addr: addr, streams: map[*Stream]struct{}{}}
	if t != nil {
		c.tls = t.clientConfig(addr)
	}
	return c, nil
}

// Close ends every stream opened on c, as a broken connection would, and
// refuses new ones.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	streams := c.streams
	c.streams = map[*Stream]struct{}{}
	c.mu.Unlock()
	for s := range streams {
		s.cancel(errConnClosed)
	}
	return nil
}

var errConnClosed = errors.New("replication: connection closed")

func (c *Conn) connect(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	if c.tls != nil {
		tc := tls.Client(nc, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	if dl, ok := ctx.Deadline(); ok {
		nc.SetWriteDeadline(dl)
	}
	if _, err := io.WriteString(nc, preface); err != nil {
		nc.Close()
		return nil, err
	}
	nc.SetWriteDeadline(time.Time{})
	return nc, nil
}

func (c *Conn) track(s *Stream) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.streams[s] = struct{}{}
	return true
}

func (c *Conn) untrack(s *Stream) {
	c.mu.Lock()
	delete(c.streams, s)
	c.mu.Unlock()
}

// Stream is a leader's stream to one follower for one partition.
type Stream struct {
	opt     Options
	nc      net.Conn
	ctx     context.Context
	cancel  context.CancelCauseFunc
	dog     *watchdog
	onFrame func(*messages.FollowerFrame)
	onDown  func(error)
	closed  atomic.Bool
	out     *outbox[*messages.LeaderFrame]
}

// Open connects a stream to conn's node. ctx bounds the stream's whole
// life: cancelling it takes the stream down like a broken connection.
//
// onFrame gets every frame from the follower except heartbeats, which the
// stream consumes. onDown gets why the stream went down: a stream error at
// once, ErrEnded when the follower ended it, ErrSilent when nothing arrived
// for DownAfter. Both run on the stream's receive goroutine, one at a time,
// and neither runs after onDown; onDown runs at most once, and not at all
// after Close.
func Open(ctx context.Context, conn *Conn, opt Options, onFrame func(*messages.FollowerFrame), onDown func(error)) (*Stream, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if conn == nil || onFrame == nil || onDown == nil {
		return nil, errors.New("replication: open needs a connection, onFrame and onDown")
	}
	nc, err := conn.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("replication: open stream to %s: %w", conn.addr, err)
	}
	sctx, cancel := context.WithCancelCause(ctx)
	s := &Stream{opt: opt, nc: nc, ctx: sctx, cancel: cancel, onFrame: onFrame, onDown: onDown, out: newOutbox[*messages.LeaderFrame]()}
	if !conn.track(s) {
		cancel(errConnClosed)
		nc.Close()
		return nil, fmt.Errorf("replication: open stream to %s: %w", conn.addr, errConnClosed)
	}
	// However the stream ends, closing the socket releases both goroutines
	// and tells the follower at once.
	context.AfterFunc(sctx, func() {
		nc.Close()
		conn.untrack(s)
	})
	s.dog = startWatchdog(opt.DownAfter, func(idle time.Duration) {
		cancel(fmt.Errorf("%w: nothing for %v", ErrSilent, idle.Round(time.Millisecond)))
	})
	go s.receive()
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
	s.out.push(f)
	return nil
}

// send writes the stream's frames and heartbeats; a failed write takes the
// stream down, and the receive goroutine reports why.
func (s *Stream) send() {
	heartbeat := func() *messages.LeaderFrame {
		return &messages.LeaderFrame{Body: &messages.LeaderFrame_Heartbeat{Heartbeat: heartbeat(s.opt.NodeID)}}
	}
	if err := sendFrames(s.nc, s.opt.Heartbeat, heartbeat, s.out, s.ctx.Done()); err != nil {
		s.cancel(fmt.Errorf("%w: %w", ErrEnded, err))
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
	r := newFrameReader(s.nc)
	for {
		f := new(messages.FollowerFrame)
		if err := r.read(f); err != nil {
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
