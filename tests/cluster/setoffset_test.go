package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

type located struct {
	Offset    int64 `json:"offset"`
	Count     int64 `json:"count"`
	Timestamp int64 `json:"timestamp"`
	Size      int32 `json:"raw_size"`
}

func messageAt(t *testing.T, hostport, topic string, count int) located {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://%s/message/get?topic=%s&partition=0&search_mode=count&search_pos=%d", hostport, topic, count))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l located
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &l) != nil {
		t.Fatalf("/message/get count %d: %d %s", count, resp.StatusCode, b)
	}
	return l
}

// Behaviour 22 (docs/replication.md#setoffset): setoffset by each mode puts
// the leader and every ISR member on the same exact message boundary before
// it answers, and the channel replays from there.
func TestBehaviour22SetOffsetSameBoundaryOnEveryISRMember(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("replay", 3)
	leader := c.nodes[st.Leader]
	testnode.Post(t, leader.HTTP, "/channel/create?topic=replay&channel=ch", "")
	p := producer(t, leader.TCP)
	for batch := 0; batch < 2; batch++ {
		var bodies [][]byte
		for i := 0; i < 10; i++ {
			bodies = append(bodies, fmt.Appendf(nil, "%d", batch*10+i))
		}
		if err := p.MultiPublish("replay", bodies); err != nil {
			t.Fatal(err)
		}
	}
	// Everything is consumed first, so each setoffset moves back.
	cons := dialRaw(t, leader.TCP)
	cons.send("SUB replay ch")
	cons.frame(10 * time.Second)
	cons.send("RDY 20")
	for range 20 {
		cons.fin(cons.message())
	}
	cons.conn.Close()
	end := messageAt(t, leader.HTTP, "replay", 19)
	endOffset := end.Offset + int64(end.Size)

	m12 := messageAt(t, leader.HTTP, "replay", 12)
	m0 := messageAt(t, leader.HTTP, "replay", 0)
	for _, tc := range []struct {
		position  string
		offset    int64
		count     int64
		firstBody string
	}{
		{"msgcount:5", messageAt(t, leader.HTTP, "replay", 5).Offset, 5, "5"},
		{fmt.Sprintf("virtual_queue:%d", m12.Offset+3), m12.Offset, 12, "12"},
		{fmt.Sprintf("timestamp:%d", m0.Timestamp/1e9), 0, 0, "0"},
		{"special:-1", endOffset, 20, ""},
	} {
		code, body := testnode.Post(t, leader.HTTP, "/channel/setoffset?topic=replay&channel=ch&partition=0", tc.position)
		var got located
		if code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Offset != tc.offset || got.Count != tc.count {
			t.Fatalf("setoffset %s: %d %s, want offset %d count %d", tc.position, code, body, tc.offset, tc.count)
		}
		// Answered only once every ISR member applied it, so their saved
		// states already hold the same boundary.
		for _, id := range st.ISR {
			saved, ok, err := storage.LoadChannelState(filepath.Join(c.nodes[id].DataPath, "topics", "replay", "0"), "ch")
			if err != nil || !ok || saved.Confirmed != tc.offset || saved.ConfirmedCount != tc.count {
				t.Fatalf("after setoffset %s, %s saved %+v (%v %v), want offset %d count %d", tc.position, id, saved, ok, err, tc.offset, tc.count)
			}
		}
		if tc.firstBody == "" {
			continue
		}
		replay := dialRaw(t, leader.TCP)
		replay.send("SUB replay ch")
		replay.frame(10 * time.Second)
		replay.send("RDY 1")
		m := replay.message()
		if string(m.Body) != tc.firstBody {
			t.Fatalf("after setoffset %s the channel replays from %q, want %q", tc.position, m.Body, tc.firstBody)
		}
		// Nothing left in flight: a message in flight stays so through a
		// setoffset, and one the closing connection puts back is
		// delivered before the next replay's first. RDY 0 goes first, or
		// the FIN makes room for the next message.
		replay.send("RDY 0")
		replay.fin(m)
		replay.conn.Close()
	}

	code, body := testnode.Post(t, leader.HTTP, "/channel/setoffset?topic=replay&channel=ch&partition=0", "msgcount:x")
	if code != 400 {
		t.Fatalf("bad position: %d %s", code, body)
	}
	follower := c.nodes[c.followers(st)[0]]
	if code, body := testnode.Post(t, follower.HTTP, "/channel/setoffset?topic=replay&channel=ch&partition=0", "msgcount:1"); code != 400 || body != `{"message":"FAILED_ON_NOT_LEADER"}` {
		t.Fatalf("setoffset on a follower: %d %s", code, body)
	}
}
