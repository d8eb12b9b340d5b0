package node

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/partitamq/partita/cluster"
)

// A node of an earlier version answers only GET /partition/last, one
// partition at a time: the controller asks it that way instead.
func TestAskLastLogIDsOfANodeKnowingOnlyOnePartitionAtATime(t *testing.T) {
	var gets atomic.Int32
	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprint(w, `{"message":"METHOD_NOT_ALLOWED"}`)
			return
		}
		gets.Add(1)
		q := r.URL.Query()
		if q.Get("topic") != "t" || q.Get("partition") == "3" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"PARTITION_NOT_FOUND"}`)
			return
		}
		p, _ := strconv.Atoi(q.Get("partition"))
		fmt.Fprintf(w, `{"last_log_id":%d}`, p*10)
	}))
	defer old.Close()
	node := cluster.NodeInfo{ID: "old", HTTPAddress: strings.TrimPrefix(old.URL, "http://")}
	var parts []cluster.PartitionRef
	for p := range int32(40) {
		parts = append(parts, cluster.PartitionRef{Topic: "t", Partition: p})
	}
	ids, err := askLastLogIDs(context.Background(), node, parts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[cluster.PartitionRef]int64{}
	for _, p := range parts {
		if p.Partition != 3 {
			want[p] = int64(p.Partition) * 10
		}
	}
	if !maps.Equal(ids, want) {
		t.Fatalf("answers %v, want %v", ids, want)
	}
	if gets.Load() != 40 {
		t.Fatalf("%d GET requests, want one for each of 40 partitions", gets.Load())
	}
}
