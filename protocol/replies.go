package protocol

import "sync"

// maxQueuedReplies bounds the answers a session holds for a client that
// pipelines commands faster than they are answered; its reader waits for
// room, so the client is slowed rather than the node's memory spent.
const maxQueuedReplies = 4096

// replyQueue is a session's answers in the order their commands came. The
// reader adds them; a publish's answer is set later, on whatever goroutine
// the partition answers on. The writer is woken only when the first answer
// is ready, so a publish costs it one wake-up, when its answer can go out,
// and none when the reader queues it.
type replyQueue struct {
	mu    sync.Mutex
	items []*reply
	// held: the reader is publishing and will write what became ready
	// itself (session.publish), so the writer is not woken for it; due
	// records that something did.
	held, due bool
	ready     chan struct{} // holds a token while the first answer may be ready
	room      chan struct{} // holds a token after the writer took answers from a full queue
}

func newReplyQueue() *replyQueue {
	return &replyQueue{ready: make(chan struct{}, 1), room: make(chan struct{}, 1)}
}

// add queues r, or waits for room; false when stop closed first.
func (q *replyQueue) add(r *reply, stop <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if len(q.items) < maxQueuedReplies {
			q.items = append(q.items, r)
			if !r.pending && len(q.items) == 1 {
				signal(q.ready)
			}
			q.mu.Unlock()
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-stop:
			return false
		}
	}
}

// answered marks r's frame as set, and reports whether the answers at the
// head became ready for whoever answered to write (answerNow) or wake the
// writer for.
func (q *replyQueue) answered(r *reply) (ready bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r.pending = false
	if len(q.items) == 0 || q.items[0] != r {
		return false
	}
	if q.held {
		q.due = true
		return false
	}
	return true
}

// hold keeps answered from waking the writer until release.
func (q *replyQueue) hold() {
	q.mu.Lock()
	q.held = true
	q.mu.Unlock()
}

// release ends hold and reports whether the head became ready meanwhile:
// then the caller writes it or wakes the writer.
func (q *replyQueue) release() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	due := q.due
	q.held, q.due = false, false
	return due
}

// takeReady removes and returns the answers at the head that are ready.
func (q *replyQueue) takeReady() []*reply {
	out, _ := q.take(false)
	return out
}

// takePlain is takeReady up to the first answer that only the writer may
// write (a fatal error, which closes the connection, or an IDENTIFY's OK,
// which changes the stream); more reports that such an answer is ready.
func (q *replyQueue) takePlain() (out []*reply, more bool) { return q.take(true) }

func (q *replyQueue) take(plain bool) (out []*reply, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for n < len(q.items) && !q.items[n].pending && !(plain && q.items[n].special()) {
		n++
	}
	more = n < len(q.items) && !q.items[n].pending
	if n == 0 {
		return nil, more
	}
	out = make([]*reply, n)
	copy(out, q.items)
	full := len(q.items) >= maxQueuedReplies
	q.items = append(q.items[:0], q.items[n:]...)
	if full {
		signal(q.room)
	}
	return out, more
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
