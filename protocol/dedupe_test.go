package protocol_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// logBodies reads a one-partition topic's committed messages, in order,
// through /message/get.
func logBodies(t *testing.T, n *testnode.Node, topic string) []string {
	t.Helper()
	var out []string
	for pos := 0; ; pos++ {
		code, body := n.Get(t, fmt.Sprintf("/message/get?topic=%s&partition=0&search_mode=count&search_pos=%d", topic, pos))
		if code == http.StatusNotFound {
			return out
		}
		var m struct{ Body string }
		if code != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
			t.Fatalf("/message/get %d: %d %s", pos, code, body)
		}
		out = append(out, m.Body)
	}
}

// Within the topic's dedupe window, PUB_EXT and MPUB_EXT of a ##msg_id the
// partition already wrote are answered as the first was, a traced one with
// the first message's ID, offset and size, and are not written again; the
// new messages of a batch are written once. /pub takes the ID as msg_id.
func TestIdempotentPublishOverTCP(t *testing.T) {
	n := startNode(t)
	if code, body := n.Post(t, "/topic/create?topic=idem&partition_num=1&extend=true&dedupe_window=1m", ""); code != 200 {
		t.Fatalf("/topic/create: %d %s", code, body)
	}
	p := dial(t, n)
	p.send("PUB_EXT idem 0", extBody(`{"##msg_id":"a","##trace_id":"5"}`, "a"))
	first := p.tracedOK()
	p.send("PUB_EXT idem 0", extBody(`{"##msg_id":"a","##trace_id":"5"}`, "a"))
	if again := p.tracedOK(); again != first {
		t.Fatalf("retry answered %+v, want the first's %+v", again, first)
	}
	p.send("MPUB_EXT idem", mpubBody(extBody(`{"##msg_id":"a"}`, "a"), extBody(`{"##msg_id":"b"}`, "b"), extBody("", "no id")))
	p.response(protocol.ResponseOK)
	p.send("MPUB_EXT idem", mpubBody(extBody(`{"##msg_id":"b"}`, "b"), extBody(`{"##msg_id":"c"}`, "c")))
	p.response(protocol.ResponseOK)
	p.send("PUB_EXT idem", extBody(`{"##msg_id":17}`, "bad"))
	p.errorFrame("E_INVALID_JSON_HEADER PUB_EXT ##msg_id should be a string of 1 to 128 bytes")
	for range 2 {
		if code, body := n.Post(t, "/pub?topic=idem&msg_id=d", "d"); code != 200 {
			t.Fatalf("/pub with msg_id: %d %s", code, body)
		}
	}
	want := []string{"a", "b", "no id", "c", "d"}
	if got := logBodies(t, n, "idem"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log holds %q, want %q", got, want)
	}
	_, metrics := n.Get(t, "/metrics")
	for _, series := range []string{
		`partita_topic_dedupe_entries{node="` + nodeLabel(t, metrics) + `",partition="0",topic="idem"} 4`,
		`partita_topic_dedupe_hits_total{node="` + nodeLabel(t, metrics) + `",partition="0",topic="idem"} 4`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// nodeLabel is the node label of a node's own series.
func nodeLabel(t *testing.T, metrics string) string {
	t.Helper()
	_, rest, ok := strings.Cut(metrics, `partita_topic_dedupe_entries{node="`)
	if !ok {
		t.Fatal("/metrics has no partita_topic_dedupe_entries")
	}
	label, _, _ := strings.Cut(rest, `"`)
	return label
}

// Without a dedupe window, the same IDs are written every time, and /pub's
// msg_id needs an ext topic, where the ID is kept.
func TestPublishWithoutDedupeWindowWritesEveryRetry(t *testing.T) {
	n := startNode(t)
	createExt(t, n, "nodedupe")
	p := dial(t, n)
	for range 2 {
		p.send("PUB_EXT nodedupe 0", extBody(`{"##msg_id":"a"}`, "a"))
		p.response(protocol.ResponseOK)
	}
	if got := logBodies(t, n, "nodedupe"); len(got) != 2 {
		t.Fatalf("log holds %q, want the message twice", got)
	}
	if code, body := n.Post(t, "/pub?topic=plain&msg_id=x", "x"); code != http.StatusBadRequest {
		t.Fatalf("/pub with msg_id on a plain topic: %d %s", code, body)
	}
}
