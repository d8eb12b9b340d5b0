package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/partitamq/partita/httpapi"
	"github.com/partitamq/partita/internal/testnode"
)

// POST /partition/last answers many partitions in one request, the same
// LogIDs GET /partition/last gives one by one, and leaves out the
// partitions this node does not hold.
func TestPartitionLastAnswersManyPartitionsAtOnce(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=last&partition_num=3", "", "")
	for i := range 7 {
		mustPost(t, n, "/pub?topic=last", fmt.Sprint("m", i), "OK")
	}
	q := httpapi.PartitionsLast{}
	want := httpapi.PartitionsLast{}
	for p := range int32(3) {
		q.Partitions = append(q.Partitions, httpapi.PartitionLogID{Topic: "last", Partition: p})
		var one struct {
			LastLogID int64 `json:"last_log_id"`
		}
		getJSON(t, n, fmt.Sprintf("/partition/last?topic=last&partition=%d", p), &one)
		want.Partitions = append(want.Partitions, httpapi.PartitionLogID{Topic: "last", Partition: p, LastLogID: one.LastLogID})
	}
	q.Partitions = append(q.Partitions, httpapi.PartitionLogID{Topic: "last", Partition: 9}, httpapi.PartitionLogID{Topic: "none", Partition: 0})
	body, _ := json.Marshal(q)
	a := call(t, n, http.MethodPost, "/partition/last", string(body))
	var got httpapi.PartitionsLast
	if err := json.Unmarshal([]byte(a.body), &got); a.status != http.StatusOK || err != nil {
		t.Fatalf("POST /partition/last: %d %s (%v)", a.status, a.body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("POST /partition/last: %+v, want %+v", got, want)
	}
	total := int64(0)
	for _, p := range got.Partitions {
		total += p.LastLogID
	}
	if total == 0 {
		t.Fatalf("no partition has a LogID after 7 publishes: %+v", got)
	}
	if a := call(t, n, http.MethodPost, "/partition/last", "not json"); a.status != http.StatusBadRequest || !strings.Contains(a.body, "INVALID_BODY") {
		t.Fatalf("a body that is not JSON: %d %s", a.status, a.body)
	}
}
