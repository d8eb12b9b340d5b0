package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /topic/partition/move and /cluster/node/remove check their
// arguments before anything is stored, and a move to a node that is not
// live is refused with the reason; moving a replica needs a second node,
// which the process tests in tests/cluster have.
func TestPartitionMoveAndNodeRemoveRefusals(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=mv&partition_num=1", "", "")
	for _, tc := range []struct {
		query  string
		status int
		body   string
	}{
		{"partition=0&move_from=a&move_to=b", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC")},
		{"topic=mv&move_from=a&move_to=b", http.StatusBadRequest, errBody("MISSING_ARG_TOPIC_PARTITION")},
		{"topic=mv&partition=x&move_from=a&move_to=b", http.StatusBadRequest, errBody("INVALID_ARG_TOPIC_PARTITION_NUM")},
		{"topic=mv&partition=0&move_from=a", http.StatusBadRequest, errBody("MISSING_ARG_MOVE_NODE")},
		{"topic=nope&partition=0&move_from=a&move_to=b", http.StatusNotFound, errBody("TOPIC_NOT_FOUND")},
		{"topic=mv&partition=0&move_from=a&move_to=zz", http.StatusBadRequest, errBody(`invalid replica move: node \"zz\" is not live`)},
	} {
		expectV1(t, n, http.MethodPost, "/topic/partition/move?"+tc.query, "", tc.status, tc.body)
	}
	expectV1(t, n, http.MethodPost, "/cluster/node/remove", "", http.StatusBadRequest, errBody("MISSING_ARG_REMOVE_NODE"))
	expectV1(t, n, http.MethodPost, "/cluster/node/remove?remove_node=a/b", "", http.StatusBadRequest, errBody(`invalid replica move: node ID \"a/b\"`))
}
