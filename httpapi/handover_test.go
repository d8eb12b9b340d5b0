package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/partitamq/partita/httpapi"
	"github.com/partitamq/partita/internal/testnode"
)

// POST /partition/handover holds the writes of the partitions named, in
// the epoch named, and marks those drained; a partition this node does
// not lead in that epoch, or does not hold, is answered not drained. With
// not_stored it ends their holds instead, and needs none. A body that
// does not decode, or a hold that is not a positive time up to 5 s, is a
// bad request.
func TestPartitionHandOverAnswersEachPartition(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=ho&partition_num=1", "", "")
	ask := func(q httpapi.PlannedMoves) (int, httpapi.PlannedMoves) {
		body, _ := json.Marshal(q)
		a := call(t, n, http.MethodPost, "/partition/handover", string(body))
		var answer httpapi.PlannedMoves
		if a.status == http.StatusOK {
			if err := json.Unmarshal([]byte(a.body), &answer); err != nil {
				t.Fatalf("answer %s: %v", a.body, err)
			}
		}
		return a.status, answer
	}
	status, answer := ask(httpapi.PlannedMoves{HoldMS: 100, Partitions: []httpapi.PlannedMove{
		{Topic: "ho", Partition: 0, Epoch: 99},
		{Topic: "nowhere", Partition: 0, Epoch: 1},
	}})
	if status != http.StatusOK || len(answer.Partitions) != 2 || answer.Partitions[0].Drained || answer.Partitions[1].Drained {
		t.Fatalf("a wrong epoch and an unknown topic: %d %+v, want both not drained", status, answer)
	}
	// Moves not stored need no hold: their holds end.
	if status, _ := ask(httpapi.PlannedMoves{NotStored: true, Partitions: []httpapi.PlannedMove{{Topic: "ho", Partition: 0, Epoch: 99}}}); status != http.StatusOK {
		t.Fatalf("moves not stored: %d, want 200", status)
	}
	for _, c := range []struct {
		name string
		body string
		want string
	}{
		{"not JSON", "{", "INVALID_BODY"},
		{"no hold", `{"partitions":[]}`, "INVALID_HOLD"},
		{"too long a hold", `{"hold_ms":60000,"partitions":[]}`, "INVALID_HOLD"},
	} {
		a := call(t, n, http.MethodPost, "/partition/handover", c.body)
		if a.status != http.StatusBadRequest || a.body != errBody(c.want) {
			t.Errorf("%s: %d %s, want 400 %s", c.name, a.status, a.body, errBody(c.want))
		}
	}
}
