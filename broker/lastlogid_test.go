package broker

import (
	"fmt"
	"maps"
	"testing"

	"github.com/partitamq/partita/cluster"
)

// LastLogIDs reads each partition's commit log beside its actor: it gives
// the LogID the actor reports as its last committed one, 0 for a partition
// not written yet, and leaves out partitions this node does not hold.
func TestLastLogIDsReadTheCommitLogs(t *testing.T) {
	b := soloBroker(t)
	tp, err := b.CreateTopic(t.Context(), "last", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		p := i % 2 // partition 2 stays empty
		if r := b.PublishWait(tp, p, [][]byte{[]byte(fmt.Sprint("m", i))}, 0, Forwarded{}); r.Err != nil {
			t.Fatalf("publish %d: %v", i, r.Err)
		}
	}
	want := map[cluster.PartitionRef]int64{}
	for _, st := range b.Stats("last") {
		want[cluster.PartitionRef{Topic: st.Topic, Partition: st.Partition}] = st.LastLogID
	}
	if len(want) != 3 || want[cluster.PartitionRef{Topic: "last", Partition: 0}] == 0 || want[cluster.PartitionRef{Topic: "last", Partition: 2}] != 0 {
		t.Fatalf("the actors report %v; want partitions 0 and 1 written and 2 empty", want)
	}
	asked := []cluster.PartitionRef{{Topic: "last", Partition: 0}, {Topic: "last", Partition: 1}, {Topic: "last", Partition: 2}, {Topic: "last", Partition: 9}, {Topic: "none", Partition: 0}}
	if got := b.LastLogIDs(asked); !maps.Equal(got, want) {
		t.Fatalf("LastLogIDs %v; the actors report %v", got, want)
	}
}
