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

	"github.com/partitamq/partita/internal/rawio"
	"github.com/partitamq/partita/messages"
)

// connectTimeout bounds dialling a follower and the TLS handshake: a
// follower cut off by the network should fail the attempt, and the replica
// actor redials, rather than hang it.
const connectTimeout = time.Second

// dialBackoff is how long a failed dial answers every Open at once with
// its error: thousands of replica actors redialling a dead node share one
// attempt instead of each making their own.
const dialBackoff = 100 * time.Millisecond

// Conn is a leader node's side of its session to one follower node. The
// session is one TCP connection carrying the streams of every partition
// the two nodes share; it is dialled when the first stream opens and again
// by the first Open after it breaks.
type Conn struct {
	addr string
	tls  *tls.Config

	mu      sync.Mutex
	sess    *session
	dialing *dialAttempt // the dial under way
	// failed is the last dial's error, or the silence that ended the last
	// session: Opens get it until failAt+dialBackoff, and while keep
	// dials, OutOfReach reports it.
	failed  error
	failAt  time.Time
	backoff time.Duration // how long failed answers Opens at once: dialBackoff; tests shorten it
	closed  bool
	broken  func(error) // hears of every session that broke, but not of Close

	// up ends when a session is next established; nil while no one
	// waits for one (nextUp). keeping: keep is dialling for the waiters;
	// askedAt: when one last asked.
	up      context.Context
	upDone  context.CancelFunc
	keeping bool
	askedAt time.Time
}

// keepEvery is how often keep dials a follower node that streams wait
// for: one attempt per node instead of one per stream. keepFor is how
// long it goes on after the last stream asked; a stream whose fallback
// timer tries again asks again.
const (
	keepEvery = 200 * time.Millisecond
	keepFor   = 30 * time.Second
)

// Unreachable is Open's error when no session to the follower node could
// be had: Reachable ends when one is next established (a dial by keep, or
// by another Open), so the stream's owner tries again then rather than on
// a timer of its own.
type Unreachable struct {
	err error
	up  context.Context
}

func (u *Unreachable) Error() string { return u.err.Error() }
func (u *Unreachable) Unwrap() error { return u.err }

// Reachable ends when a session to the node is next up.
func (u *Unreachable) Reachable() context.Context { return u.up }

// nextUp is a context that ends when a session is next established, and
// starts keep dialling for it; nil when c is closed. One that ended at
// once means a session is up now.
func (c *Conn) nextUp(opt Options) context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	if c.upLocked() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	return c.waitForUpLocked(opt)
}

// waitForUpLocked is nextUp's context while no session is up, with keep
// dialling for it; c.mu is held.
func (c *Conn) waitForUpLocked(opt Options) context.Context {
	if c.up == nil {
		c.up, c.upDone = context.WithCancel(context.Background())
	}
	c.askedAt = time.Now()
	if !c.keeping {
		c.keeping = true
		go c.keep(opt)
	}
	return c.up
}

// keep dials the follower node every keepEvery until a session is up, c
// closes, or no stream has asked for keepFor.
func (c *Conn) keep(opt Options) {
	t := time.NewTicker(keepEvery)
	defer t.Stop()
	for range t.C {
		c.mu.Lock()
		stop := c.closed || c.up == nil || time.Since(c.askedAt) > keepFor
		if stop {
			c.keeping = false
		}
		c.mu.Unlock()
		if stop {
			return
		}
		c.session(context.Background(), opt)
	}
}

// Dial prepares the session to a follower node's replication service;
// nothing connects until Open.
func Dial(addr string) (*Conn, error) {
	return DialTLS(addr, nil)
}

// DialTLS is Dial over mutual TLS; a nil t dials in plain text.
func DialTLS(addr string, t *TLS) (*Conn, error) {
	if addr == "" {
		return nil, errors.New("replication: dial without an address")
	}
	c := &Conn{addr: addr, backoff: dialBackoff}
	if t != nil {
		c.tls = t.clientConfig(addr)
	}
	return c, nil
}

// Close ends the session, and with it every stream opened on c as a
// broken connection would, and refuses new ones.
func (c *Conn) Close() error {
	c.mu.Lock()
	c.closed = true
	s := c.sess
	c.sess = nil
	if c.upDone != nil {
		c.upDone()
		c.up, c.upDone = nil, nil
	}
	c.mu.Unlock()
	if s != nil {
		s.cancel(errConnClosed)
	}
	return nil
}

var errConnClosed = errors.New("replication: connection closed")

// OnBroken has fn hear, on a goroutine of its own, of every session of c
// that breaks or goes silent; Close is not a break. Set it before the first
// Open.
func (c *Conn) OnBroken(fn func(error)) {
	c.mu.Lock()
	c.broken = fn
	c.mu.Unlock()
}

// Up reports whether the session to the follower node is up: it answered
// the dial and has not been silent for DownAfter since. That is proof the
// node's process runs, whatever etcd says of its lease.
func (c *Conn) Up() bool { return c.live() != nil }

// upLocked reports whether c's session is up; c.mu is held.
func (c *Conn) upLocked() bool { return c.sess != nil && c.sess.ctx.Err() == nil }

// live is the session that is up now; nil when none is or c is closed.
func (c *Conn) live() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || !c.upLocked() {
		return nil
	}
	return c.sess
}

// OutOfReach reports, without blocking or dialling, that the follower node
// is out of reach as far as c knows: no session is up and the last dial
// failed, or the last session went silent (a first dial, or one after a
// session broke otherwise, may succeed: those are waited for). It returns
// the Unreachable an Open would, whose Reachable ends when a session is
// next up; nil when an Open may
// succeed now. A node that dies leaves thousands of streams to it on each
// survivor: asked first, it spares each of them a goroutine and a wait for
// a dial that the session makes once for all.
func (c *Conn) OutOfReach(opt Options) *Unreachable {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil
	}
	c.mu.Lock()
	up := c.upLocked()
	why := c.failed
	// A failure is news while keep redials (every keepEvery) or within
	// dialBackoff; an older one may be of a node that came back since
	// while nobody dialled it, and the Open's own dial finds out.
	fresh := c.keeping || time.Since(c.failAt) < c.backoff
	c.mu.Unlock()
	if up || why == nil || !fresh {
		return nil
	}
	next := c.nextUp(opt)
	if next == nil {
		return nil // closed: Open says so
	}
	return &Unreachable{err: fmt.Errorf("replication: open stream to %s: %w", c.addr, why), up: next}
}

// session returns the live session, dialling one if there is none. Opens
// that arrive while a dial is under way wait for it rather than dial too.
func (c *Conn) session(ctx context.Context, opt Options) (*session, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return nil, errConnClosed
		case c.upLocked():
			s := c.sess
			c.mu.Unlock()
			return s, nil
		case c.dialing != nil:
			d := c.dialing
			c.mu.Unlock()
			select {
			case <-d.done:
				// The dial's failure is the answer however late this
				// caller runs after it: thousands of Opens woken together
				// by one failed dial would otherwise run past the backoff
				// by the hundred, and the first of those would start the
				// next dial for all of them.
				if d.err != nil {
					return nil, d.err
				}
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		case c.failed != nil && time.Since(c.failAt) < c.backoff:
			err := c.failed
			c.mu.Unlock()
			return nil, err
		}
		d := &dialAttempt{done: make(chan struct{})}
		c.dialing = d
		c.mu.Unlock()

		s, err := c.dialSession(ctx, opt)
		c.mu.Lock()
		c.dialing = nil
		if err != nil && ctx.Err() == nil {
			d.err = err
		}
		close(d.done)
		switch {
		case err == nil && c.closed:
			s.cancel(errConnClosed)
			err = errConnClosed
		case err == nil:
			c.sess, c.failed = s, nil
			if c.upDone != nil {
				c.upDone()
				c.up, c.upDone = nil, nil
			}
		case ctx.Err() == nil:
			// A failure of the caller's own context says nothing of the peer.
			c.failed, c.failAt = err, time.Now()
		}
		c.mu.Unlock()
		return s, err
	}
}

// dialAttempt is a dial under way, for the Opens that wait for it: err
// is its failure, unless the failure was its caller's own context, which
// says nothing of the peer (those who waited then dial themselves).
type dialAttempt struct {
	done chan struct{}
	err  error // set before done closes
}

func (c *Conn) dialSession(ctx context.Context, opt Options) (*session, error) {
	nc, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	// A follower answers the preface with a heartbeat at once. Until it
	// does, a connection proves nothing: the kernel of a paused (SIGSTOP)
	// or wedged process accepts it all the same, and a session opened on
	// it brought every stream up, only for the watchdog to take them all
	// down again DownAfter later, round after round, each round costing
	// every partition the two nodes share a catch-up probe and a resend.
	r := newFrameReader(rawio.Reader(nc))
	first := new(messages.FollowerFrame)
	nc.SetReadDeadline(time.Now().Add(connectTimeout))
	if err := r.read(first); err != nil {
		nc.Close()
		return nil, fmt.Errorf("replication: the follower did not answer: %w", err)
	}
	nc.SetReadDeadline(time.Time{})
	return startSession(c, nc, r, first, opt), nil
}

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

// partitionKey names a partition on a session: acks carry it, and it routes
// each back to the stream that sent that partition's frames.
type partitionKey struct {
	topic     string
	partition int32
}

// session is one TCP connection from this node, the leader, to a follower
// node. Its heartbeats and watchdog stand for every stream on it: when it
// breaks or goes silent, each stream hears so at once.
type session struct {
	conn   *Conn
	opt    Options
	nc     net.Conn
	ctx    context.Context
	cancel context.CancelCauseFunc
	dog    *watchdog
	out    *outbox[queued]
	// frames: the follower said it takes ReplicaWrites frames.
	frames atomic.Bool

	mu      sync.Mutex
	streams map[*Stream]struct{}
	routes  map[partitionKey]*Stream
}

// queued is a frame waiting for the session's sender, with the stream that
// sent it: a stream closed meanwhile has its frames dropped, as a closed
// connection of its own would have.
type queued struct {
	s *Stream
	f *messages.LeaderFrame
}

func startSession(c *Conn, nc net.Conn, r *frameReader, first *messages.FollowerFrame, opt Options) *session {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &session{
		conn: c, opt: opt, nc: nc, ctx: ctx, cancel: cancel,
		out:     newOutbox[queued](),
		streams: map[*Stream]struct{}{},
		routes:  map[partitionKey]*Stream{},
	}
	s.dog = startWatchdog(opt.DownAfter, unreadBytes(nc), func(idle time.Duration) {
		cancel(fmt.Errorf("%w: nothing for %v", ErrSilent, idle.Round(time.Millisecond)))
	})
	// However the session ends, closing the socket releases both
	// goroutines and tells the follower at once.
	context.AfterFunc(ctx, func() { nc.Close() })
	s.handle(first, true)
	go s.receive(r)
	go s.send()
	return s
}

// add puts a stream on the session; false if the session is already down.
func (s *session) add(st *Stream) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return false
	}
	s.streams[st] = struct{}{}
	return true
}

func (s *session) remove(st *Stream) {
	s.mu.Lock()
	delete(s.streams, st)
	for k, r := range s.routes {
		if r == st {
			delete(s.routes, k)
		}
	}
	s.mu.Unlock()
}

// push queues st's frame f, routing f's partition's acks to st (whichever
// stream last sent a partition's frames is the one its answers belong
// to); sendNow writes it from this goroutine when it can
// (outbox.writeNow), sendLater leaves it for the next write.
func (s *session) push(st *Stream, f *messages.LeaderFrame, when sendMode) {
	if k, ok := keyOf(f); ok {
		s.mu.Lock()
		if s.routes[k] != st {
			s.routes[k] = st
		}
		s.mu.Unlock()
	}
	switch when {
	case sendNow:
		s.out.pushNow(queued{s: st, f: f})
	case sendLater:
		s.out.pushLater(queued{s: st, f: f})
	default:
		s.out.push(queued{s: st, f: f})
	}
}

func keyOf(f *messages.LeaderFrame) (partitionKey, bool) {
	switch b := f.GetBody().(type) {
	case *messages.LeaderFrame_Write:
		return partitionKey{b.Write.GetTopic(), b.Write.GetPartition()}, true
	case *messages.LeaderFrame_Offset:
		return partitionKey{b.Offset.GetTopic(), b.Offset.GetPartition()}, true
	case *messages.LeaderFrame_Writes:
		if ws := b.Writes.GetWrites(); len(ws) > 0 {
			return partitionKey{ws[0].GetTopic(), ws[0].GetPartition()}, true
		}
	}
	return partitionKey{}, false
}

func (s *session) route(a *messages.ReplicaAck) *Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.routes[partitionKey{a.GetTopic(), a.GetPartition()}]
}

// send writes the session's frames and heartbeats; a failed write takes the
// session down, and the receive goroutine reports why.
func (s *session) send() {
	heartbeat := func() vtMessage {
		return &messages.LeaderFrame{Body: &messages.LeaderFrame_Heartbeat{Heartbeat: heartbeat(s.opt.NodeID)}}
	}
	frame := func(q queued) vtMessage {
		if q.s.closed.Load() {
			return nil
		}
		return q.f
	}
	if err := sendFrames(s.nc, s.opt.Heartbeat, heartbeat, s.out, frame, s.ctx.Done()); err != nil {
		s.cancel(fmt.Errorf("%w: %w", ErrEnded, err))
	}
}

func (s *session) receive(r *frameReader) {
	for {
		f := new(messages.FollowerFrame)
		if err := r.read(f); err != nil {
			s.down(err)
			return
		}
		s.dog.touch()
		s.handle(f, r.br.Buffered() == 0)
	}
}

// handle takes one frame from the follower; last says nothing more has
// been read after it.
func (s *session) handle(f *messages.FollowerFrame, last bool) {
	if f.GetHeartbeat().GetTakesFrames() {
		s.frames.Store(true)
	}
	if b := f.GetBatch(); b != nil {
		inner := b.GetFrames()
		for i, f := range inner {
			s.deliver(f, last && i == len(inner)-1)
		}
		return
	}
	s.deliver(f, last)
}

// deliver hands an ack to the stream of its partition. Heartbeats only feed
// the watchdog; a kind only a newer follower knows is ignored.
func (s *session) deliver(f *messages.FollowerFrame, last bool) {
	a := f.GetAck()
	if acks := f.GetAcks().GetAcks(); len(acks) > 0 {
		a = acks[0] // a frame's acks are all of its partition
	}
	if a == nil {
		return
	}
	if st := s.route(a); st != nil && !st.closed.Load() {
		st.onFrame(f, last)
	}
}

// down ends the session and tells every stream still on it, each once.
func (s *session) down(err error) {
	switch {
	case s.ctx.Err() != nil:
		err = context.Cause(s.ctx) // silence, or Conn.Close
	case errors.Is(err, io.EOF):
		err = ErrEnded
	default:
		err = fmt.Errorf("replication: session: %w", err)
	}
	s.cancel(err)
	s.dog.stop()
	if broken := s.conn.forget(s, err); broken != nil && !errors.Is(err, errConnClosed) {
		go broken(err)
	}
	s.mu.Lock()
	streams := make([]*Stream, 0, len(s.streams))
	for st := range s.streams {
		streams = append(streams, st)
	}
	clear(s.streams)
	clear(s.routes)
	s.mu.Unlock()
	for _, st := range streams {
		st.down(err)
	}
}

// forget drops a session that went down for err, so the next Open dials
// anew, and returns who hears of breaks.
//
// A session that went silent counts as a failed dial, and keep starts
// dialling for the streams that were on it: the follower's process is
// stopped or starved, and its kernel may still accept a connection that
// nothing answers for connectTimeout. Its thousands of streams, opened
// again within the replica actors' first redial, then wait for keep's
// session (OutOfReach) instead of each waiting on a goroutine of its own
// for that dial. keep stops once a session is up, or keepFor after the
// last stream asked (the silence counts as one asking).
func (c *Conn) forget(s *session, err error) func(error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == s {
		c.sess = nil
		if errors.Is(err, ErrSilent) && !c.closed {
			c.failed, c.failAt = err, time.Now()
			c.waitForUpLocked(s.opt)
		}
	}
	return c.broken
}
