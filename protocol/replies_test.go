package protocol

import (
	"testing"
)

// An answer not yet set wakes no writer; setting it makes the head ready
// for whoever set it to send (session.answered), and the answers behind it
// that were ready go out with it, in order.
func TestReplyQueueWakesTheWriterOnlyForReadyAnswers(t *testing.T) {
	q := newReplyQueue()
	pub := &reply{pending: true}
	q.add(pub, nil)
	if len(q.ready) != 0 {
		t.Fatal("a publish's answer not yet set woke the writer")
	}
	ok := &reply{}
	q.add(ok, nil)
	if len(q.ready) != 0 || len(q.takeReady()) != 0 {
		t.Fatal("an answer behind one not yet set was ready to go")
	}
	if !q.answered(pub) {
		t.Fatal("setting the first answer did not make the head ready")
	}
	if got := q.takeReady(); len(got) != 2 || got[0] != pub || got[1] != ok {
		t.Fatalf("took %v, want the publish's answer and then the OK", got)
	}
	later := &reply{}
	q.add(later, nil)
	if len(q.ready) != 1 {
		t.Fatal("a ready answer at the head of an empty queue did not wake the writer")
	}
}

// A full queue holds the reader until the writer takes answers, or the
// session stops.
func TestReplyQueueBoundsWhatWaits(t *testing.T) {
	q := newReplyQueue()
	for range maxQueuedReplies {
		q.add(&reply{}, nil)
	}
	added := make(chan bool)
	go func() { added <- q.add(&reply{}, nil) }()
	if n := len(q.takeReady()); n != maxQueuedReplies {
		t.Fatalf("took %d from a full queue: it took one more", n)
	}
	if !<-added {
		t.Fatal("the waiting answer was not queued once there was room")
	}

	for range maxQueuedReplies - 1 {
		q.add(&reply{}, nil)
	}
	stop := make(chan struct{})
	go func() { added <- q.add(&reply{}, stop) }()
	close(stop)
	if <-added {
		t.Fatal("an answer was queued on a full queue after the session stopped")
	}
}

// While the reader holds the queue, a head that becomes ready is left for
// it (release says so) and reported to no one else.
func TestReplyQueueHeldLeavesReadyAnswersToTheReader(t *testing.T) {
	q := newReplyQueue()
	pub := &reply{pending: true}
	q.add(pub, nil)
	q.hold()
	if q.answered(pub) {
		t.Fatal("an answer set while held was reported ready to its setter")
	}
	if !q.release() {
		t.Fatal("release did not report the answer set while held")
	}
	if q.release() {
		t.Fatal("a second release reported it again")
	}
	if got, more := q.takePlain(); len(got) != 1 || got[0] != pub || more {
		t.Fatalf("took %v (more %v), want the publish's answer", got, more)
	}
	// A fatal answer is the writer's: takePlain stops before it.
	fatal := &reply{fatal: true}
	q.add(fatal, nil)
	if got, more := q.takePlain(); len(got) != 0 || !more {
		t.Fatalf("took %v (more %v), want nothing and the fatal answer left for the writer", got, more)
	}
}
