package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/internal/testnode"
)

// A batch of forwarded publishes is written as forwarded /mpubs are,
// each answered on its own: one refused (its partition is not here, its
// deadline has passed) refuses none of the others. A batch that does not
// decode, or names no forwarder, is a bad request and writes nothing.
func TestForwardsAnswerEachPublishOfABatch(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=fwds", "", "")
	mustPost(t, n, "/channel/create?topic=fwds&channel=ch", "", "")
	soon := time.Now().Add(time.Hour)
	batch := []broker.Forward{
		{Topic: "fwds", Partition: 0, Deadline: soon, Bodies: [][]byte{[]byte("a1"), []byte("a2")}},
		{Topic: "fwds", Partition: 7, Deadline: soon, Bodies: [][]byte{[]byte("nowhere")}},
		{Topic: "fwds", Partition: 0, Deadline: time.Now().Add(-time.Millisecond), Bodies: [][]byte{[]byte("late")}},
		{Topic: "fwds", Partition: 0, Bodies: [][]byte{[]byte("b")}},
	}
	want := []string{"", "FAILED_ON_NOT_LEADER", "FAILED_ON_NOT_WRITABLE", ""}
	forwarded := http.Header{broker.ForwardedHeader: {"n9"}}
	status, body := postForwards(t, n, broker.EncodeForwards(batch), forwarded)
	if status != http.StatusOK {
		t.Fatalf("POST %s: %d %q", broker.ForwardsPath, status, body)
	}
	got := map[int]string{}
	r := bufio.NewReader(bytes.NewReader(body))
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("reading the answers %q: %v", body, err)
		}
		code := make([]byte, head[4])
		if _, err := io.ReadFull(r, code); err != nil {
			t.Fatalf("reading the answers %q: %v", body, err)
		}
		i := int(binary.BigEndian.Uint32(head[:4]))
		if _, twice := got[i]; twice {
			t.Fatalf("publish %d answered twice", i)
		}
		got[i] = string(code)
	}
	for i, w := range want {
		if code, ok := got[i]; !ok || code != w {
			t.Fatalf("publish %d answered %q (answered: %t), want %q; all: %v", i, code, ok, w, got)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers for %d publishes: %v", len(got), len(want), got)
	}
	waitChannelDepth(t, n, "fwds", "ch", 3)

	for _, c := range []struct {
		name   string
		body   []byte
		header http.Header
		status int
		answer string
	}{
		{"cut short", broker.EncodeForwards(batch)[:20], forwarded, 400, errBody("BAD_BODY")},
		{"no forwarder", broker.EncodeForwards(batch), http.Header{}, 400, errBody("MISSING_FORWARDER")},
	} {
		status, body := postForwards(t, n, c.body, c.header)
		if status != c.status || string(body) != c.answer {
			t.Fatalf("%s: %d %s, want %d %s", c.name, status, body, c.status, c.answer)
		}
	}
	if count := topicTotal(t, n, "fwds", messages); count != 3 {
		t.Fatalf("%d messages after bad batches, want 3", count)
	}
}

func postForwards(t *testing.T, n *testnode.Node, body []byte, header http.Header) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+n.HTTPAddr()+broker.ForwardsPath, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}
