package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// idBatch is batch k of a producer that names its messages: n messages,
// IDs k-0 .. k-<n-1>, for MPUB_EXT.
func idBatch(k, n int) []byte {
	var pairs []string
	for j := range n {
		id := fmt.Sprintf("%d-%d", k, j)
		pairs = append(pairs, fmt.Sprintf(`{"##msg_id":%q}`, id), "body "+id)
	}
	return extMPUB(pairs...)
}

// tryPublish sends one command with its body to addr and reports whether
// it was answered OK; a refused connection, an error or no answer within
// the timeout is false, as a producer sees them.
func tryPublish(addr, cmd string, body []byte) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	msg := append([]byte(protocol.MagicV2+cmd+"\n"), byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body)))
	if _, err := conn.Write(append(msg, body...)); err != nil {
		return false
	}
	for {
		typ, data, err := protocol.ReadFrame(conn)
		if err != nil {
			return false
		}
		if typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			continue
		}
		return typ == protocol.FrameTypeResponse && string(data) == "OK"
	}
}

// publishUntilOK retries a publish to the partition's current leader until
// it is answered OK, as a producer retries an error or a timeout.
func (c *testCluster) publishUntilOK(name string, p int32, body []byte) {
	c.t.Helper()
	testnode.Eventually(c.t, 30*time.Second, fmt.Sprintf("a publish to %s/%d answered OK", name, p), func() bool {
		return c.publishToLeader(name, p, body)
	})
}

// publishToLeader sends an MPUB_EXT to the partition's leader as the
// metadata names it, and reports whether it was answered OK.
func (c *testCluster) publishToLeader(name string, p int32, body []byte) bool {
	return c.publishVia(func(id string) string {
		if n := c.nodes[id]; n != nil {
			return n.TCP
		}
		return ""
	}, name, p, body)
}

// publishVia is publishToLeader with the leader's TCP address found by
// tcp ("" for none), for callers that run beside restarts of nodes and
// so must not read c.nodes.
func (c *testCluster) publishVia(tcp func(id string) string, name string, p int32, body []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	st, ok, err := c.assign.Get(ctx, name, p)
	cancel()
	if err != nil || !ok {
		return false
	}
	addr := tcp(st.Leader)
	if addr == "" {
		return false
	}
	return tryPublish(addr, fmt.Sprintf("MPUB_EXT %s %d", name, p), body)
}

// loggedIDs counts the ##msg_id of every committed message of a topic's
// partitions, read from each partition's leader.
func (c *testCluster) loggedIDs(name string, partitions int32) map[string]int {
	c.t.Helper()
	out := map[string]int{}
	for id, stamps := range c.loggedIDTimes(name, partitions) {
		out[id] = len(stamps)
	}
	return out
}

// loggedIDTimes is the timestamps of every committed message of a topic's
// partitions by ##msg_id, read from each partition's leader.
func (c *testCluster) loggedIDTimes(name string, partitions int32) map[string][]int64 {
	c.t.Helper()
	out := map[string][]int64{}
	for p := range partitions {
		leader := c.nodes[c.state(name, p).Leader]
		for pos := 0; ; pos++ {
			resp, err := http.Get(fmt.Sprintf("http://%s/message/get?topic=%s&partition=%d&search_mode=count&search_pos=%d", leader.HTTP, name, p, pos))
			if err != nil {
				c.t.Fatal(err)
			}
			var m struct {
				Ext       string
				Timestamp int64
			}
			err = json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			if resp.StatusCode == http.StatusNotFound {
				break
			}
			if resp.StatusCode != http.StatusOK || err != nil {
				c.t.Fatalf("/message/get %s/%d at %d: %d %v", name, p, pos, resp.StatusCode, err)
			}
			id := topic.MsgIDOf([]byte(m.Ext))
			out[id] = append(out[id], m.Timestamp)
		}
	}
	return out
}

// A producer that retries every publish after the leader is killed in the
// middle of a batch, and once more after each was answered (an answer it
// lost), finds each message once in the log with a dedupe window: the new
// leader rebuilt the window from its log, so retries of what the old
// leader wrote are recognised. Without a window the same producer writes
// duplicates.
func TestIdempotentRetriesAcrossAFailover(t *testing.T) {
	const partitions, batches, perBatch, killAt = 2, 20, 10, 10
	c := startCluster(t, 3)
	for _, name := range []string{"idem", "noidem"} {
		q := fmt.Sprintf("/topic/create?topic=%s&partition_num=%d&replicator=3&extend=true", name, partitions)
		if name == "idem" {
			q += "&dedupe_window=1m"
		}
		if code, body := testnode.Post(t, c.nodes["n1"].HTTP, q, ""); code != 200 {
			t.Fatalf("creating %s: %d %s", name, code, body)
		}
	}
	names := []string{"idem", "noidem"}
	for k := range killAt {
		for _, name := range names {
			c.publishUntilOK(name, int32(k%partitions), idBatch(k, perBatch))
		}
	}
	// The leader of idem's partition 0 dies with batch killAt sent and
	// unanswered.
	victim := c.state("idem", 0).Leader
	for _, name := range names {
		if st := c.state(name, 0); st.Leader == victim {
			r := dialRaw(t, c.nodes[victim].TCP)
			r.sendBody(fmt.Sprintf("MPUB_EXT %s 0", name), idBatch(killAt, perBatch))
		}
	}
	c.nodes[victim].Kill(t)
	delete(c.nodes, victim)
	// Every batch again, and each new one a second time after its OK.
	for k := range batches {
		for _, name := range names {
			c.publishUntilOK(name, int32(k%partitions), idBatch(k, perBatch))
			if k > killAt {
				c.publishUntilOK(name, int32(k%partitions), idBatch(k, perBatch))
			}
		}
	}

	ids := c.loggedIDs("idem", partitions)
	if len(ids) != batches*perBatch {
		t.Fatalf("idem holds %d distinct IDs, want %d", len(ids), batches*perBatch)
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("idem holds %s %d times with a dedupe window", id, n)
		}
	}
	dups := 0
	noIDs := c.loggedIDs("noidem", partitions)
	for _, n := range noIDs {
		dups += n - 1
	}
	if len(noIDs) != batches*perBatch || dups < (batches-1)*perBatch {
		t.Fatalf("noidem holds %d distinct IDs and %d duplicates, want %d and at least %d", len(noIDs), dups, batches*perBatch, (batches-1)*perBatch)
	}
}
