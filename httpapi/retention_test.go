package httpapi_test

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

// Retention deletes whole segments, only those behind every channel's
// confirmed offset: a channel that has consumed everything does not let
// retention pass one that has not, and that one still gets every message
// after its own position.
func TestRetentionDeletesOnlyWhatEveryChannelConfirmed(t *testing.T) {
	n := testnode.Start(t, "--max-bytes-per-file", "200", "--retention-bytes", "1",
		"--retention-check-interval", "20ms", "--channel-persist-interval", "20ms")
	mustPost(t, n, "/topic/create?topic=ret", "", "")
	mustPost(t, n, "/channel/create?topic=ret&channel=fast", "", "")
	mustPost(t, n, "/channel/create?topic=ret&channel=slow", "", "")
	for i := range 20 {
		mustPost(t, n, "/pub?topic=ret", fmt.Sprintf("m%02d", i), "OK")
	}
	dir := filepath.Join(n.DataPath, "topics", "ret", "0")

	fast := subscribe(t, n, "ret", "fast", map[string]any{}, 20)
	for range 20 {
		fast.send(nsq.Finish(fast.message().ID))
	}
	slow := subscribe(t, n, "ret", "slow", map[string]any{}, 10)
	for i := range 10 {
		m := slow.message()
		if string(m.Body) != fmt.Sprintf("m%02d", i) {
			t.Fatalf("slow got %q at %d", m.Body, i)
		}
		slow.send(nsq.Finish(m.ID))
	}
	var slowAt int64
	eventually(t, "slow's offset saved past 10 messages", func() bool {
		st, ok, err := storage.LoadChannelState(dir, "slow")
		slowAt = st.Confirmed
		return err == nil && ok && st.ConfirmedCount == 10
	}, func() any { return slowAt })
	eventually(t, "the first message deleted", func() bool {
		return call(t, n, http.MethodGet, "/message/get?topic=ret&partition=0&search_mode=count&search_pos=0", "").status == http.StatusNotFound
	}, func() any { return nil })

	// The log now starts at a record boundary no later than slow's offset.
	first := -1
	for c := 1; c <= 10; c++ {
		if call(t, n, http.MethodGet, fmt.Sprintf("/message/get?topic=ret&partition=0&search_mode=count&search_pos=%d", c), "").status == http.StatusOK {
			first = c
			break
		}
	}
	if first < 1 || first > 10 {
		t.Fatalf("first retained message %d, want one in 1..10 (slow confirmed 10)", first)
	}
	var m foundMessage
	getJSON(t, n, fmt.Sprintf("/message/get?topic=ret&partition=0&search_mode=count&search_pos=%d", first), &m)
	if m.Offset > slowAt {
		t.Fatalf("retained log starts at %d, past slow's confirmed offset %d", m.Offset, slowAt)
	}
	slow.send(nsq.Ready(10))
	for i := 10; i < 20; i++ {
		if got := slow.message(); string(got.Body) != fmt.Sprintf("m%02d", i) {
			t.Fatalf("slow got %q, want m%02d", got.Body, i)
		}
	}
}
