package cluster

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

const testAdminToken = "s3cret"

// postAdmin POSTs an admin call with the test cluster's token.
func postAdmin(t *testing.T, hostport, pathAndQuery string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+hostport+pathAndQuery, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// pub publishes one message over youzan's PUB <topic> <partition> and
// returns the answer's frame type and data.
func (r *rawConn) pub(topic string, p int32, body string) (int32, string) {
	r.t.Helper()
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(body)))
	if _, err := r.conn.Write([]byte(fmt.Sprintf("PUB %s %d\n%s%s", topic, p, size[:], body))); err != nil {
		r.t.Fatal(err)
	}
	typ, data := r.frame(10 * time.Second)
	return typ, string(data)
}

// checkWritesOff checks that a node's /stats and /metrics say /disable/write
// holds want ("all", "ordered" or "none") there, as its POST answered.
func checkWritesOff(t *testing.T, hostport, want string) {
	t.Helper()
	var doc struct {
		WriteDisabled *string `json:"write_disabled"`
	}
	getJSONInto(t, hostport, "/stats?format=json", &doc)
	if doc.WriteDisabled == nil || *doc.WriteDisabled != want {
		t.Fatalf("/stats write_disabled %v, want %q", doc.WriteDisabled, want)
	}
	for _, typ := range []string{"all", "ordered"} {
		wantV := "0"
		if typ == want {
			wantV = "1"
		}
		if v := testnode.Metric(t, hostport, "partita_node_writes_disabled", `type="`+typ+`"`); v != wantV {
			t.Fatalf("partita_node_writes_disabled{type=%q} %q with %s disabled, want %s", typ, v, want, wantV)
		}
	}
}

// youzan's /disable/write: the node refuses, without closing the
// connection, every publish to a partition it leads, whichever node the
// publish came through, while it forwards those for other leaders and
// those naming no partition; its
// leaderships stay; "ordered" refuses only ordered topics; "none" undoes
// it. The call is an admin one and its type is checked. /stats and
// /metrics say what is disabled after each change.
func TestDisableWriteStopsANodesWrites(t *testing.T) {
	c := startCluster(t, 3, "--http-admin-token", testAdminToken)
	for _, q := range []string{"topic=dw&partition_num=3&replicator=3", "topic=dwo&partition_num=3&replicator=3&orderedmulti=true"} {
		if code, body := postAdmin(t, c.nodes["n1"].HTTP, "/topic/create?"+q); code != 200 {
			t.Fatalf("create %s: %d %s", q, code, body)
		}
	}
	// The node leading dw/0 is the one whose writes stop.
	x := c.state("dw", 0).Leader
	ledBy := func(topic, node string, want bool) int32 {
		t.Helper()
		for p := range int32(3) {
			if (c.state(topic, p).Leader == node) == want {
				return p
			}
		}
		t.Fatalf("no partition of %s led by %s: %v", topic, node, want)
		return 0
	}
	other, orderedX := ledBy("dw", x, false), ledBy("dwo", x, true)
	y := c.state("dw", other).Leader
	pubHTTP := func(through, topic string, p int32) (int, string) {
		t.Helper()
		return testnode.Post(t, c.nodes[through].HTTP, fmt.Sprintf("/pub?topic=%s&partition=%d", topic, p), "m")
	}
	for _, tp := range []struct {
		topic string
		p     int32
	}{{"dw", 0}, {"dw", other}, {"dwo", orderedX}} {
		testnode.Eventually(t, 20*time.Second, fmt.Sprintf("%s/%d taking writes", tp.topic, tp.p), func() bool {
			code, _ := pubHTTP(x, tp.topic, tp.p)
			return code == 200
		})
	}

	checkWritesOff(t, c.nodes[x].HTTP, "none")
	if code, body := testnode.Post(t, c.nodes[x].HTTP, "/disable/write?type=all", ""); code != 401 {
		t.Fatalf("without the token: %d %s, want 401", code, body)
	}
	if code, body := postAdmin(t, c.nodes[x].HTTP, "/disable/write?type=al"); code != 400 || !strings.Contains(body, "INVALID_ARG_TYPE") {
		t.Fatalf("type=al: %d %s, want 400 INVALID_ARG_TYPE", code, body)
	}
	checkWritesOff(t, c.nodes[x].HTTP, "none")
	if code, body := postAdmin(t, c.nodes[x].HTTP, "/disable/write?type=all"); code != 200 || !strings.Contains(body, `"write_disabled":"all"`) {
		t.Fatalf("type=all: %d %s", code, body)
	}
	checkWritesOff(t, c.nodes[x].HTTP, "all")
	checkWritesOff(t, c.nodes[y].HTTP, "none")
	conn := dialRaw(t, c.nodes[x].TCP)
	if typ, data := conn.pub("dw", 0, "refused"); typ != protocol.FrameTypeError || !strings.HasPrefix(data, "E_FAILED_ON_NOT_LEADER") {
		t.Fatalf("PUB to a partition it leads: %d %q, want E_FAILED_ON_NOT_LEADER", typ, data)
	}
	if code, body := pubHTTP(y, "dw", 0); code != 503 || !strings.Contains(body, "FAILED_ON_NOT_LEADER") {
		t.Fatalf("/pub forwarded to it through %s: %d %s, want 503 FAILED_ON_NOT_LEADER", y, code, body)
	}
	if code, body := pubHTTP(x, "dw", other); code != 200 {
		t.Fatalf("/pub through it to %s's partition: %d %s", y, code, body)
	}
	for range 3 {
		if code, body := testnode.Post(t, c.nodes[x].HTTP, "/pub?topic=dw", "any"); code != 200 {
			t.Fatalf("/pub naming no partition through it: %d %s, want it sent to another leader", code, body)
		}
	}
	if code, _ := pubHTTP(x, "dwo", orderedX); code != 503 {
		t.Fatalf("/pub to its ordered partition: %d, want 503", code)
	}
	if st := c.state("dw", 0); st.Leader != x {
		t.Fatalf("leadership moved to %s", st.Leader)
	}

	if code, body := postAdmin(t, c.nodes[x].HTTP, "/disable/write?type=ordered"); code != 200 || !strings.Contains(body, `"write_disabled":"ordered"`) {
		t.Fatalf("type=ordered: %d %s", code, body)
	}
	checkWritesOff(t, c.nodes[x].HTTP, "ordered")
	if code, _ := pubHTTP(x, "dwo", orderedX); code != 503 {
		t.Fatalf("/pub to its ordered partition with ordered writes off: %d, want 503", code)
	}
	if typ, data := conn.pub("dw", 0, "taken"); typ != protocol.FrameTypeResponse || data != "OK" {
		t.Fatalf("PUB of an unordered topic on the same connection: %d %q", typ, data)
	}

	if code, body := postAdmin(t, c.nodes[x].HTTP, "/disable/write?type=none"); code != 200 || !strings.Contains(body, `"write_disabled":"none"`) {
		t.Fatalf("type=none: %d %s", code, body)
	}
	checkWritesOff(t, c.nodes[x].HTTP, "none")
	if code, body := pubHTTP(y, "dwo", orderedX); code != 200 {
		t.Fatalf("/pub to its ordered partition once undone: %d %s", code, body)
	}
}
