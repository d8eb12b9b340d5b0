package topic_test

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// The bucket starts full, lets what is taken beyond its tokens be owed,
// and says how long the debt takes to pay at its rate; it never saves more
// than its burst.
func TestTokenBucketOwesWhatItCannotPay(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	b := topic.TokenBucket{Rate: 1000, Burst: 500}
	if w := b.Wait(t0); w != 0 {
		t.Fatalf("a full bucket waits %v", w)
	}
	b.Take(t0, 1500) // 500 saved, 1000 owed
	if w := b.Wait(t0); w != time.Second {
		t.Fatalf("owing 1000 at 1000/s waits %v, want 1s", w)
	}
	if w := b.Wait(t0.Add(600 * time.Millisecond)); w != 400*time.Millisecond {
		t.Fatalf("600 ms later waits %v, want 400ms", w)
	}
	if w := b.Wait(t0.Add(time.Hour)); w != 0 {
		t.Fatalf("an hour later waits %v", w)
	}
	b.Take(t0.Add(time.Hour), 600) // an hour saved only the burst
	if w := b.Wait(t0.Add(time.Hour)); w != 100*time.Millisecond {
		t.Fatalf("after the burst waits %v, want 100ms", w)
	}
	free := topic.TokenBucket{}
	free.Take(t0, 1<<30)
	if w := free.Wait(t0); w != 0 {
		t.Fatalf("no rate waits %v", w)
	}
}

// A wiped replica caught up under --catchup-rate-limit takes at least the
// time the rate allows for the log beyond one burst and the last chunk
// (read once the debt before it was paid), and ends with the leader's
// commit log.
func TestCatchUpIsPacedByTheNodesRate(t *testing.T) {
	const rate = 40_000 // bytes a second
	var size int64
	start := time.Now()
	c := newMemClusterFrom(t, 5*time.Second, 2, storage.Options{}, func(node string, store *storage.Partition) {
		if node == "n3" {
			return // wiped
		}
		for i := 0; i < 3000; i++ { // 93 kB in 12 chunks
			history(t, store, 1, "m")
		}
		size = store.Log.End()
	}, func(node string, o *topic.Options) {
		o.CatchupLimit = topic.NewCatchupLimit(rate)
	})
	if r := c.publish("new"); r.Err != nil { // waits for n3, which is in the ISR
		t.Fatal(r.Err)
	}
	took := time.Since(start)
	lastChunk := size / 12
	least := time.Duration(float64(size-rate-lastChunk) / rate * float64(time.Second))
	t.Logf("caught up %d bytes in %v", size, took)
	if took < least {
		t.Fatalf("caught up %d bytes in %v at %d bytes/s, want at least %v", size, took, rate, least)
	}
	c.stopAndCompare(t, "n2", "n3")
}
