package replication

import (
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"
)

// outbox holds a session's outgoing frames for its sender goroutine, so
// whoever sends (a replica actor, a partition replying) never waits on
// the network, and frames queued together, of any partitions, leave in one
// write.
//
// A frame pushed while the sender is idle and nothing is queued is written
// by the pusher itself, if the socket takes all of it at once: a write
// and its ack each cross two processes and several goroutines, and on a
// synchronous publish every wake-up of a sender goroutine is latency. What
// the socket does not take at once is left to the sender, ahead of
// anything queued after it; the pusher never waits on the network.
type outbox[E any] struct {
	mu     sync.Mutex
	frames []E
	ready  chan struct{} // holds a token while frames is not empty, or rest or err is set

	// wire is held by whoever writes to the socket: the sender, or a
	// pusher writing at once. The fields below are under it.
	wire   sync.Mutex
	direct *directWriter[E] // nil until the sender starts, and for sockets without a raw descriptor (TLS)
	rest   []byte           // the part of a frame written at once that the socket did not take
	err    error            // a write at once failed; the sender ends with it

	cutShort atomic.Int64 // writes at once the socket did not take whole
}

// directWriter is what a pusher needs to write a frame itself.
type directWriter[E any] struct {
	raw   syscall.RawConn
	frame func(E) proto.Message
	enc   *frameWriter // for its encode buffer only
}

func newOutbox[E any]() *outbox[E] {
	return &outbox[E]{ready: make(chan struct{}, 1)}
}

func (o *outbox[E]) push(e E) {
	if o.wire.TryLock() {
		wrote := o.writeNow(e)
		o.wire.Unlock()
		if wrote {
			return
		}
	}
	o.mu.Lock()
	o.frames = append(o.frames, e)
	o.mu.Unlock()
	o.wake()
}

func (o *outbox[E]) wake() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

// writeNow writes e to the socket without waiting, under wire; false
// leaves it to the sender: no raw socket, something queued before it, or
// the sender's own write failed.
func (o *outbox[E]) writeNow(e E) bool {
	d := o.direct
	if d == nil || o.err != nil || len(o.rest) > 0 {
		return false
	}
	o.mu.Lock()
	queued := len(o.frames) > 0
	o.mu.Unlock()
	if queued {
		return false
	}
	m := d.frame(e)
	if m == nil {
		return true // dropped, as the sender would
	}
	b, err := d.enc.encode(m)
	if err != nil {
		return false // the sender meets the same error and ends the session
	}
	n, err := writeWithoutWaiting(d.raw, b)
	switch {
	case err != nil:
		o.err = err
		o.wake()
	case n < len(b):
		o.cutShort.Add(1)
		o.rest = append(o.rest[:0], b[n:]...)
		o.wake()
	}
	return true
}

// writeWithoutWaiting writes what the socket takes of b at once.
func writeWithoutWaiting(raw syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), b)
			if werr != syscall.EINTR {
				break
			}
		}
		if errors.Is(werr, syscall.EAGAIN) {
			n, werr = 0, nil
		}
		return true // never wait for the socket to take more
	})
	if err != nil {
		return 0, err
	}
	return max(n, 0), werr
}

func (o *outbox[E]) take() []E {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.frames
	o.frames = nil
	return f
}

// sendFrames is a session end's only writer but for pushers writing at
// once: a heartbeat at once and every interval, and whatever the outbox
// holds (frame maps an entry to what goes on the wire, nil to drop it),
// until done closes (nil) or a write fails (its error).
func sendFrames[E any](w io.Writer, every time.Duration, heartbeat func() proto.Message, out *outbox[E], frame func(E) proto.Message, done <-chan struct{}) error {
	fw := newFrameWriter(w)
	tick := time.NewTicker(every)
	defer tick.Stop()
	out.wire.Lock()
	defer out.wire.Unlock()
	if sc, ok := w.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			out.direct = &directWriter[E]{raw: raw, frame: frame, enc: &frameWriter{}}
		}
	}
	defer func() { out.direct = nil }()
	err := fw.write(heartbeat())
	for err == nil {
		if err = fw.flush(); err != nil {
			break
		}
		out.wire.Unlock()
		select {
		case <-done:
			out.wire.Lock()
			return nil
		case <-tick.C:
			out.wire.Lock()
			err = fw.write(heartbeat())
		case <-out.ready:
			out.wire.Lock()
			err = out.sendQueued(fw, frame)
		}
	}
	return err
}

// sendQueued buffers what a write at once left and then the queued
// frames, under wire.
func (o *outbox[E]) sendQueued(fw *frameWriter, frame func(E) proto.Message) error {
	if o.err != nil {
		return o.err
	}
	if len(o.rest) > 0 {
		if _, err := fw.bw.Write(o.rest); err != nil {
			return err
		}
		o.rest = o.rest[:0]
	}
	for _, e := range o.take() {
		if f := frame(e); f != nil {
			if err := fw.write(f); err != nil {
				return err
			}
		}
	}
	return nil
}
