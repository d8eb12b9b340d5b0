package replication

import (
	"io"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
)

// outbox holds a stream's outgoing frames for its sender goroutine, so
// whoever sends (a replica actor, a partition replying) never waits on
// the network, and frames queued together leave in one write.
type outbox[F proto.Message] struct {
	mu     sync.Mutex
	frames []F
	ready  chan struct{} // holds a token while frames is not empty
}

func newOutbox[F proto.Message]() *outbox[F] {
	return &outbox[F]{ready: make(chan struct{}, 1)}
}

func (o *outbox[F]) push(f F) {
	o.mu.Lock()
	o.frames = append(o.frames, f)
	o.mu.Unlock()
	select {
	case o.ready <- struct{}{}:
	default:
	}
}

func (o *outbox[F]) take() []F {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.frames
	o.frames = nil
	return f
}

// sendFrames is a stream end's only writer: a heartbeat at once and every
// interval, and whatever the outbox holds, until done closes (nil) or a
// write fails (its error).
func sendFrames[F proto.Message](w io.Writer, every time.Duration, heartbeat func() F, out *outbox[F], done <-chan struct{}) error {
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
			for _, f := range out.take() {
				if err = fw.write(f); err != nil {
					break
				}
			}
		}
	}
	return err
}
