package protocol

import (
	"testing"
)

// An answer not yet set wakes no writer; setting it does, and the answers
// behind it that were ready go out with it, in order.
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
	q.answered(pub)
	if len(q.ready) != 1 {
		t.Fatal("setting the first answer did not wake the writer")
	}
	<-q.ready
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
