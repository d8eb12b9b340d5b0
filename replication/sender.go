package replication

import (
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
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
	// and will write what was pushed meanwhile itself (writeHere), so the
	// sender is not woken for it; due records that something was.
	held, due bool

	// pen is held by whoever writes the session's frames: the sender, or
	// the reader in writeHere. fw and frame are sendFrames', under pen.
	pen   sync.Mutex
	fw    *frameWriter
	frame func(E) proto.Message
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

// hold keeps push from waking the sender until release.
func (o *outbox[E]) hold() {
	o.mu.Lock()
	o.held = true
	o.mu.Unlock()
}

// release ends hold and reports whether frames were pushed meanwhile: then
// the caller writes them (writeHere).
func (o *outbox[E]) release() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	due := o.due
	o.held, o.due = false, false
	return due
}

// writeHere writes what the outbox holds from the caller's goroutine when
// the sender is not writing, and otherwise wakes the sender for it; the
// error is a failed write's, which ends the session.
func (o *outbox[E]) writeHere() error {
	if !o.pen.TryLock() {
		o.wake()
		return nil
	}
	defer o.pen.Unlock()
	if o.fw == nil {
		o.wake()
		return nil
	}
	return writeEntries(o.fw, o.take(), o.frame)
}

// writeEntries buffers the frames of es (frame maps each to what goes on
// the wire, nil to drop it) and flushes them.
func writeEntries[E any](fw *frameWriter, es []E, frame func(E) proto.Message) error {
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
// interval, and whatever the outbox holds (frame maps an entry to what goes
// on the wire, nil to drop it), until done closes (nil) or a write fails
// (its error). The session's reader may write the outbox's frames between
// its turns (writeHere).
func sendFrames[E any](w io.Writer, every time.Duration, heartbeat func() proto.Message, out *outbox[E], frame func(E) proto.Message, done <-chan struct{}) error {
	fw := newFrameWriter(w)
	tick := time.NewTicker(every)
	defer tick.Stop()
	out.pen.Lock()
	out.fw, out.frame = fw, frame
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
			out.pen.Lock()
			if err = fw.write(heartbeat()); err == nil {
				err = fw.flush()
			}
			out.pen.Unlock()
		case <-out.ready:
			out.pen.Lock()
			err = writeEntries(fw, out.take(), frame)
			out.pen.Unlock()
		}
	}
	return err
}
