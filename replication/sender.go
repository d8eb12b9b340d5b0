package replication

import (
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/partitamq/partita/internal/rawio"
)

// outbox holds a session's outgoing frames for its sender goroutine, so
// whoever sends (a replica actor, a partition replying) never waits on
// the network, and frames queued together, of any partitions, leave in one
// write.
type outbox[E any] struct {
	mu     sync.Mutex
	frames []E
	ready  chan struct{} // holds a token while frames is not empty
	// held: the session's reader is applying a frame on its own goroutine
	// and will write what was pushed meanwhile itself (writeNow), so the
	// sender is not woken for it; due records that something was.
	held, due bool

	// pen is held by whoever writes the session's frames: the sender, or
	// another goroutine in writeNow. fw, frame and raw are sendFrames',
	// under pen.
	pen   sync.Mutex
	fw    *frameWriter
	frame func(E) vtMessage
	raw   syscall.Conn // the socket under fw, for writeNow; nil over TLS
	buf   []byte       // writeNow's frames
	owed  []byte       // what writeNow's write left, for the sender to write first
}

func newOutbox[E any]() *outbox[E] {
	return &outbox[E]{ready: make(chan struct{}, 1)}
}

func (o *outbox[E]) push(e E) {
	o.mu.Lock()
	o.frames = append(o.frames, e)
	if o.held {
		o.due = true
		o.mu.Unlock()
		return
	}
	o.mu.Unlock()
	o.wake()
}

// pushLater queues e without waking the sender: it leaves with the next
// frame written, or with the next heartbeat at the latest.
func (o *outbox[E]) pushLater(e E) {
	o.mu.Lock()
	o.frames = append(o.frames, e)
	o.mu.Unlock()
}

func (o *outbox[E]) wake() {
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *outbox[E]) take() []E {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.frames
	o.frames = nil
	return f
}

// pushNow queues e and writes the queued frames (writeNow).
func (o *outbox[E]) pushNow(e E) {
	o.mu.Lock()
	o.frames = append(o.frames, e)
	o.mu.Unlock()
	o.writeNow()
}

// writeNow writes the queued frames from the caller's goroutine when the
// sender is idle with nothing buffered, with one write that never waits
// for room; what the socket does not take, and every other case, is the
// sender's.
func (o *outbox[E]) writeNow() {
	if !o.pen.TryLock() {
		o.wake()
		return
	}
	defer o.pen.Unlock()
	if o.raw == nil || o.fw == nil || o.fw.bw.Buffered() > 0 || len(o.owed) > 0 {
		o.wake()
		return
	}
	b := o.buf[:0]
	es := o.take()
	for i, e := range es {
		f := o.frame(e)
		if f == nil {
			continue
		}
		var err error
		if b, err = appendFrame(b, f); err != nil {
			// Left for the sender, which meets the same error and ends
			// the session, after what was encoded before it.
			o.requeue(es[i:])
			o.owed = append(o.owed, b...)
			o.wake()
			return
		}
	}
	if cap(b) <= keptBuffer {
		o.buf = b[:0]
	}
	if n := rawio.TryWrite(o.raw, b); n < len(b) {
		// Never a blocking write here: the sender writes the rest.
		o.owed = append(o.owed, b[n:]...)
		o.wake()
	}
}

// requeue puts es back at the front of the outbox.
func (o *outbox[E]) requeue(es []E) {
	o.mu.Lock()
	o.frames = append(es[:len(es):len(es)], o.frames...)
	o.mu.Unlock()
}

// hold keeps push from waking the sender until release.
func (o *outbox[E]) hold() {
	o.mu.Lock()
	o.held = true
	o.mu.Unlock()
}

// release ends hold and reports whether frames were pushed meanwhile: then
// the caller writes them (writeNow).
func (o *outbox[E]) release() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	due := o.due
	o.held, o.due = false, false
	return due
}

// writeEntries buffers the frames of es (frame maps each to what goes on
// the wire, nil to drop it) and flushes them.
func writeEntries[E any](fw *frameWriter, es []E, frame func(E) vtMessage) error {
	for _, e := range es {
		if f := frame(e); f != nil {
			if err := fw.write(f); err != nil {
				return err
			}
		}
	}
	return fw.flush()
}

// sendFrames is a session end's writer: a heartbeat at once and every
// interval, with the frames pushed for later, and whatever the outbox
// holds when woken (frame maps an entry to what goes on the wire, nil to
// drop it), until done closes (nil) or a write fails (its error). Other
// goroutines may write the outbox's frames between its writes
// (writeNow).
func sendFrames[E any](w net.Conn, every time.Duration, heartbeat func() vtMessage, out *outbox[E], frame func(E) vtMessage, done <-chan struct{}) error {
	fw := newFrameWriter(rawio.Writer(w))
	tick := time.NewTicker(every)
	defer tick.Stop()
	out.pen.Lock()
	out.fw, out.frame = fw, frame
	out.raw, _ = w.(syscall.Conn)
	err := fw.write(heartbeat())
	if err == nil {
		err = fw.flush()
	}
	out.pen.Unlock()
	for err == nil {
		select {
		case <-done:
			return nil
		case <-tick.C:
			// What waits (frames pushed for later) leaves with the heartbeat.
			err = out.penned(func() error {
				if err := fw.write(heartbeat()); err != nil {
					return err
				}
				return writeEntries(fw, out.take(), frame)
			})
		case <-out.ready:
			err = out.penned(func() error { return writeEntries(fw, out.take(), frame) })
		}
	}
	return err
}

// penned runs the sender's write f holding the pen, after what writeNow
// left unwritten.
func (o *outbox[E]) penned(f func() error) error {
	o.pen.Lock()
	defer o.pen.Unlock()
	if len(o.owed) > 0 {
		if _, err := o.fw.bw.Write(o.owed); err != nil {
			return err
		}
		o.owed = o.owed[:0]
	}
	return f()
}
