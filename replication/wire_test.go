package replication

import (
	"bytes"
	"testing"

	"github.com/partitamq/partita/messages"
)

// A catch-up chunk of megabytes passes through a stream's buffers without
// staying in them.
func TestFrameBuffersDoNotKeepABigFrame(t *testing.T) {
	var wire bytes.Buffer
	w := newFrameWriter(&wire)
	for _, size := range []int{100, 4 << 20, 100} {
		if err := w.write(writeFrame(1, size)); err != nil {
			t.Fatal(err)
		}
		if cap(w.buf) > keptBuffer {
			t.Fatalf("after a frame of %d bytes the writer keeps %d bytes", size, cap(w.buf))
		}
	}
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	r := newFrameReader(&wire)
	for _, size := range []int{100, 4 << 20, 100} {
		f := new(messages.LeaderFrame)
		if err := r.read(f); err != nil {
			t.Fatal(err)
		}
		if got := len(f.GetWrite().GetMessages()); got != size {
			t.Fatalf("read a write of %d bytes, want %d", got, size)
		}
		if cap(r.buf) > keptBuffer {
			t.Fatalf("after a frame of %d bytes the reader keeps %d bytes", size, cap(r.buf))
		}
	}
}
