package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /message/finish: a message its consumer always requeues holds
// an ordered channel back; finished by its ID over HTTP, the next one is
// delivered.
func TestMessageFinishUnblocksAnOrderedChannel(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=poison", "", "")
	mustPost(t, n, "/channel/create?topic=poison&channel=c", "", "")
	mustPost(t, n, "/channel/setorder?topic=poison&channel=c&order=true", "", "")
	mustPost(t, n, "/pub?topic=poison", "bad", "OK")
	mustPost(t, n, "/pub?topic=poison", "good", "OK")

	var mu sync.Mutex
	var seen []string
	var badID string
	cfg := nsq.NewConfig()
	cfg.MaxAttempts = 0 // go-nsq would otherwise give up on it by itself
	c := newConsumer(t, "poison", "c", cfg, nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, string(m.Body))
		if string(m.Body) == "bad" {
			badID = string(m.ID[:])
			m.RequeueWithoutBackoff(0)
		}
		return nil
	}))
	if err := c.ConnectToNSQD(n.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	count := func(body string) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, b := range seen {
			if b == body {
				k++
			}
		}
		return k, badID
	}
	eventually(t, "the bad message delivered again and again", func() bool { k, _ := count("bad"); return k >= 3 },
		func() any { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) })
	if k, _ := count("good"); k != 0 {
		t.Fatal("the ordered channel delivered past a message still requeued")
	}
	if a := call(t, n, "POST", "/message/finish?topic=poison&channel=c&partition=0&msgid=00000000deadbeef", ""); a.status != http.StatusNotFound {
		t.Fatalf("finishing an ID the channel does not hold: %d %s, want 404", a.status, a.body)
	}
	_, id := count("bad")
	// In flight or requeued, whichever it is at the moment of the call.
	eventually(t, "the finish taken", func() bool {
		a := call(t, n, "POST", fmt.Sprintf("/message/finish?topic=poison&channel=c&partition=0&msgid=%s", id), "")
		return a.status == http.StatusOK
	}, func() any { return id })
	eventually(t, "the next message delivered", func() bool { k, _ := count("good"); return k == 1 },
		func() any { mu.Lock(); defer mu.Unlock(); return slices.Clone(seen) })
	if a := call(t, n, "POST", "/message/finish?topic=poison&channel=c&partition=0&msgid=nothex", ""); a.status != http.StatusBadRequest {
		t.Fatalf("a bad ID: %d %s", a.status, a.body)
	}
}
