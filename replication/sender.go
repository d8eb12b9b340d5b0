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
}

func newOutbox[E any]() *outbox[E] {
	return &outbox[E]{ready: make(chan struct{}, 1)}
}

func (o *outbox[E]) push(e E) {
	o.mu.Lock()
	o.frames = append(o.frames, e)
	o.mu.Unlock()
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

// sendFrames is a session end's only writer: a heartbeat at once and every
// interval, and whatever the outbox holds (frame maps an entry to what goes
// on the wire, nil to drop it), until done closes (nil) or a write fails
// (its error).
func sendFrames[E any](w io.Writer, every time.Duration, heartbeat func() proto.Message, out *outbox[E], frame func(E) proto.Message, done <-chan struct{}) error {
	fw := newFrameWriter(w)
	tick := time.NewTicker(every)
	defer tick.Stop()
	err := fw.write(heartbeat())
	for err == nil {
		if err = fw.flush(); err != nil {
			break
		}
		select {
		case <-done:
			return nil
		case <-tick.C:
			err = fw.write(heartbeat())
		case <-out.ready:
			for _, e := range out.take() {
				f := frame(e)
				if f == nil {
					continue
				}
				if err = fw.write(f); err != nil {
					break
				}
			}
		}
	}
	return err
}
