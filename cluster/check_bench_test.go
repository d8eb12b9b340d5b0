package cluster

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkCheckScans is what a controller check reads of a view of
// 10,000 partitions on three live nodes when nothing needs a leader or a
// repair: the lapses, the leaderless partitions and the nodes gone.
func BenchmarkCheckScans(b *testing.B) {
	view := partitionView{}
	nodes := []string{"n1", "n2", "n3"}
	for i := range 10000 {
		st := PartitionState{Topic: fmt.Sprintf("t%d", i/1000), Partition: int32(i % 1000), Leader: nodes[i%3],
			ISR: []string{nodes[i%3], nodes[(i+1)%3], nodes[(i+2)%3]}, EpochForWrite: 1, Replicas: 3, Revision: int64(i + 1)}
		view[st.Ref()] = st
	}
	live := map[string]NodeInfo{}
	var infos []NodeInfo
	for _, n := range nodes {
		live[n] = NodeInfo{ID: n}
		infos = append(infos, NodeInfo{ID: n})
	}
	c := &Controller{}
	lapsed, keep, resigned := newLapses(time.Second), newUpkeep(time.Minute), resignedSince{}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		spared, _ := lapsed.spare(view.all(), liveSet(live), nil, now)
		if lost := c.leaderless(view.all(), live, resigned, spared); len(lost) != 0 {
			b.Fatalf("%d leaderless", len(lost))
		}
		if from := keep.repairFrom(view.all(), nodeIDs(infos), now); len(from) != 0 {
			b.Fatalf("repairs from %v", from)
		}
	}
}
