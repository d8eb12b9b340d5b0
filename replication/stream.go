package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/partitamq/partita/messages"
)

// Stream is a leader's stream to one follower for one partition: a
// partition's share of the session to the follower's node.
type Stream struct {
	sess    *session
	onFrame func(f *messages.FollowerFrame, last bool)
	onDown  func(error)
	closed  atomic.Bool
	stopCtx func() bool // stops watching the caller's context

	mu      sync.Mutex
	err     error // why the stream is down; nil while it is up
	settled bool  // onDown ran or will never run
}

// Open opens a stream to conn's node on the session to it, dialling the
// session if there is none. ctx bounds the stream's whole life: cancelling
// it takes the stream down like a broken connection.
//
// onFrame gets the follower's acks for the partition the stream sends
// frames of: an Ack frame for each single write or offset that asks for
// one, an Acks frame for each ReplicaWrites frame; heartbeats are the
// session's. last says nothing more was there to read: the session's
// reader would sleep next, so onFrame may do the frame's work on it. onDown gets why the stream went
// down: a session error at once, ErrEnded when the follower ended the
// session, ErrSilent when nothing arrived for DownAfter, the context's
// cause when ctx ended. Both run on the session's receive goroutine, one at
// a time, except onDown for an ended ctx, which runs on a goroutine of its
// own and may overlap a last onFrame. onFrame does not run after onDown
// otherwise; onDown runs at most once, and not at all after Close.
//
// The session's options (heartbeat, down-after, node ID) are those of the
// Open that dialled it.
func Open(ctx context.Context, conn *Conn, opt Options, onFrame func(f *messages.FollowerFrame, last bool), onDown func(error)) (*Stream, error) {
	opt, err := opt.withDefaults()
	if err != nil {
		return nil, err
	}
	if conn == nil || onFrame == nil || onDown == nil {
		return nil, errors.New("replication: open needs a connection, onFrame and onDown")
	}
	for {
		sess, err := conn.session(ctx, opt)
		if err != nil {
			err = fmt.Errorf("replication: open stream to %s: %w", conn.addr, err)
			if ctx.Err() != nil {
				return nil, err
			}
			if up := conn.nextUp(opt); up != nil {
				return nil, &Unreachable{err: err, up: up}
			}
			return nil, err
		}
		if s := attach(ctx, sess, onFrame, onDown); s != nil {
			return s, nil
		}
		// The session broke between the two: the next round dials.
	}
}

// OpenUp is Open on the session to conn's node that is up now, without
// dialling or waiting for one: nil when none is up. A new leader opens
// streams to its followers by the thousand in a mass failover; those to a
// node it already has a session with need no goroutine each.
func OpenUp(ctx context.Context, conn *Conn, onFrame func(f *messages.FollowerFrame, last bool), onDown func(error)) *Stream {
	if conn == nil || onFrame == nil || onDown == nil || ctx.Err() != nil {
		return nil
	}
	sess := conn.live()
	if sess == nil {
		return nil
	}
	return attach(ctx, sess, onFrame, onDown)
}

// attach adds a stream to sess; nil if sess broke.
func attach(ctx context.Context, sess *session, onFrame func(f *messages.FollowerFrame, last bool), onDown func(error)) *Stream {
	s := &Stream{sess: sess, onFrame: onFrame, onDown: onDown}
	if !sess.add(s) {
		return nil
	}
	s.stopCtx = context.AfterFunc(ctx, func() {
		s.down(context.Cause(ctx))
		sess.remove(s)
	})
	return s
}

// Send queues f for the session's sender goroutine and returns at once; it
// fails once the stream is down or closed. A frame queued when the session
// breaks is lost with it: the owner hears of that through onDown.
func (s *Stream) Send(f *messages.LeaderFrame) error { return s.send(f, sendSoon) }

// SendNow is Send that also writes the session's queued frames from the
// caller's goroutine when its sender is idle, with one write that never
// waits for room; what the socket does not take goes to the sender.
func (s *Stream) SendNow(f *messages.LeaderFrame) error { return s.send(f, sendNow) }

// SendLater is Send for a frame that may wait: it leaves with the next
// frame the session writes, of any partition, or with the next heartbeat
// at the latest, instead of a write of its own. A channel's offset, which
// a follower only needs by the next failover, rides on the writes flowing
// anyway; reported for each of thousands of partitions on its own, each
// had cost a write on the leader and a read on the follower.
func (s *Stream) SendLater(f *messages.LeaderFrame) error { return s.send(f, sendLater) }

// sendMode is when a frame is written: by the sender, woken for it; from
// the sending goroutine when it can; or with the next write.
type sendMode int

const (
	sendSoon sendMode = iota
	sendNow
	sendLater
)

func (s *Stream) send(f *messages.LeaderFrame, when sendMode) error {
	if f.GetBody() == nil {
		return errors.New("replication: send of an empty frame")
	}
	if err := s.downErr(); err != nil {
		return err
	}
	s.sess.push(s, f, when)
	return nil
}

// TakesFrames reports whether the follower said it applies ReplicaWrites
// frames; until it has, send it single writes.
func (s *Stream) TakesFrames() bool { return s.sess.frames.Load() }

// Close ends the stream without calling onDown; the session stays for the
// node's other partitions. It does not wait for a callback already
// running, so it may be called from one.
func (s *Stream) Close() {
	s.closed.Store(true)
	s.mu.Lock()
	if s.err == nil {
		s.err = ErrClosed
	}
	s.settled = true
	s.mu.Unlock()
	s.stopCtx()
	s.sess.remove(s)
}

func (s *Stream) downErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// down records why the stream ended and tells its owner, once.
func (s *Stream) down(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	report := !s.settled
	s.settled = true
	s.mu.Unlock()
	if report {
		s.onDown(err)
	}
}
