package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/partitamq/partita/httpapi"
	"github.com/partitamq/partita/internal/testnode"
)

// etcdOf is the etcd client address a node was started with.
func etcdOf(t testing.TB, n *testnode.Node) string {
	for i, a := range n.Args {
		if a == "--etcd-client-address" && i+1 < len(n.Args) {
			return n.Args[i+1]
		}
	}
	t.Fatal("node started without --etcd-client-address")
	return ""
}

// moveLeader asks via to move topic's partition 0 leadership, with query's
// move_from and move_to, and returns the answer of a move that was made.
func moveLeader(t *testing.T, via *testnode.Node, topic, query string) httpapi.LeaderMoved {
	t.Helper()
	var a answer
	// A partition whose state changes between the check and the
	// controller's decision (a new one still settling) is refused with
	// 409, which a client asks again after.
	eventually(t, "a leader move not refused as a change under way", func() bool {
		a = call(t, via, "POST", "/topic/partition/move?topic="+topic+"&partition=0&move_leader=true"+query, "")
		return a.status != http.StatusConflict
	}, func() any { return a })
	if a.status != http.StatusOK {
		t.Fatalf("move%s: %d %s", query, a.status, a.body)
	}
	var m httpapi.LeaderMoved
	if err := json.Unmarshal([]byte(a.body), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// youzan's /topic/partition/move?move_leader=true, asked of a node that
// leads nothing: the leadership goes to the other ISR member and back, the
// answer names the new leader and epoch, the partition takes publishes
// again, and what cannot be moved is refused with a code before anything
// is asked of the controller.
func TestLeaderMoveOverHTTP(t *testing.T) {
	n1 := testnode.Start(t, "--node-id", "n1")
	n2 := testnode.Start(t, "--node-id", "n2", "--etcd-endpoints", etcdOf(t, n1))
	nodes := map[string]*testnode.Node{"n1": n1, "n2": n2}
	mustPost(t, n1, "/topic/create?topic=mv&partition_num=1&replicator=2", "", "")
	move := func(query string) httpapi.LeaderMoved { return moveLeader(t, n2, "mv", query) }
	moved := move("")
	first := moved.Leader
	other := map[string]string{"n1": "n2", "n2": "n1"}[first]
	if moved.Topic != "mv" || moved.Partition != 0 || moved.Epoch != 2 || other == "" {
		t.Fatalf("first move: %+v, want a leader in epoch 2", moved)
	}
	if moved = move("&move_from=" + first + "&move_to=" + other); moved.Leader != other || moved.Epoch != 3 {
		t.Fatalf("moving back: %+v, want %s in epoch 3", moved, other)
	}
	eventually(t, "a publish to the moved partition", func() bool {
		code, _ := nodes[first].Post(t, "/pub?topic=mv", "after the move")
		return code == http.StatusOK
	}, func() any { return moved })

	base := "/topic/partition/move?topic=mv&partition=0&move_leader=true"
	for _, c := range []struct {
		query  string
		status int
		code   string
	}{
		{"&move_to=" + other, http.StatusBadRequest, "MOVE_TO_IS_LEADER"},
		{"&move_to=n9", http.StatusBadRequest, "MOVE_TO_NOT_IN_ISR"},
		{"&move_from=" + first, http.StatusBadRequest, "MOVE_FROM_NOT_LEADER"},
	} {
		expectV1(t, n1, "POST", base+c.query, "", c.status, errBody(c.code))
	}
	expectV1(t, n1, "POST", "/topic/partition/move?topic=mv&move_leader=true", "", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC_PARTITION"))
	expectV1(t, n1, "POST", "/topic/partition/move?topic=mv&partition=x&move_leader=true", "", http.StatusBadRequest, errBody("INVALID_ARG_TOPIC_PARTITION_NUM"))
	expectV1(t, n1, "POST", "/topic/partition/move?topic=mv&partition=5&move_leader=true", "", http.StatusNotFound, errBody("PARTITION_NOT_FOUND"))
	expectV1(t, n1, "POST", "/topic/partition/move?partition=0&move_leader=true", "", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC"))

	mustPost(t, n1, "/topic/create?topic=single&partition_num=1&replicator=1", "", "")
	expectV1(t, n1, "POST", "/topic/partition/move?topic=single&partition=0&move_leader=true", "", http.StatusBadRequest, errBody("NO_OTHER_ISR_MEMBER"))
}
