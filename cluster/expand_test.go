package cluster

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
)

// An expand places only the partitions below the new count without a
// state; fewer or as many partitions as the topic has are refused.
func TestPartitionsToAdd(t *testing.T) {
	meta := TopicMeta{Name: "t", Partitions: 2}
	if _, err := partitionsToAdd(meta, nil, 1); !errors.Is(err, ErrPartitionsReduced) {
		t.Fatalf("shrinking: %v, want ErrPartitionsReduced", err)
	}
	if _, err := partitionsToAdd(meta, nil, 2); !errors.Is(err, ErrPartitionsUnchanged) {
		t.Fatalf("same count: %v, want ErrPartitionsUnchanged", err)
	}
	existing := []PartitionState{{Partition: 0}, {Partition: 1}, {Partition: 2}, {Partition: 3}}
	got, err := partitionsToAdd(meta, existing, 6)
	if err != nil || !reflect.DeepEqual(got, []int32{4, 5}) {
		t.Fatalf("added %v %v, want [4 5]: 2 and 3 an earlier expand stored stay", got, err)
	}
}

// placeRound places added partitions on nodes a, b, c in turn, two
// replicas each.
func placeRound(meta TopicMeta, _ []PartitionState, added []int32) ([]PartitionState, error) {
	nodes := []string{"a", "b", "c"}
	out := make([]PartitionState, len(added))
	for i, p := range added {
		isr := []string{nodes[int(p)%3], nodes[(int(p)+1)%3]}
		out[i] = PartitionState{Topic: meta.Name, Partition: p, Leader: isr[0], ISR: isr, EpochForWrite: 1, Replicas: 2}
	}
	return out, nil
}

func expandFixture(t *testing.T, partitions int32) (*MetaStore, *Assignments) {
	t.Helper()
	a, cli, _ := newTestAssignments(t)
	m := NewMetaStore(cli, "")
	ctx := context.Background()
	if _, _, err := m.CreateTopic(ctx, "t", partitions, 2); err != nil {
		t.Fatal(err)
	}
	states, _ := placeRound(TopicMeta{Name: "t"}, nil, []int32{0, 1}[:partitions])
	for _, st := range states {
		mustCreatePartition(t, a, st)
	}
	return m, a
}

// The topic's new count and the new partitions' states are stored
// together; the partitions that were there are left as they were.
func TestExpandTopicStoresTheCountAndThePartitions(t *testing.T) {
	m, a := expandFixture(t, 2)
	ctx := context.Background()
	before, _ := a.List(ctx, "t")
	stored, err := m.ExpandTopic(ctx, a, "t", 6, placeRound)
	if err != nil || stored.Partitions != 6 {
		t.Fatalf("expand: %+v %v", stored, err)
	}
	meta, _, _ := m.Topic(ctx, "t")
	after, _ := a.List(ctx, "t")
	if meta.Partitions != 6 || len(after) != 6 || !reflect.DeepEqual(after[:2], before) {
		t.Fatalf("after the expand: topic %+v, partitions %+v", meta, after)
	}
	if after[5].Leader != "c" || after[5].EpochForWrite != 1 {
		t.Fatalf("partition 5: %+v", after[5])
	}
	if _, err := m.ExpandTopic(ctx, a, "t", 4, placeRound); !errors.Is(err, ErrPartitionsReduced) {
		t.Fatalf("shrinking: %v", err)
	}
	if _, err := m.ExpandTopic(ctx, a, "nope", 4, placeRound); !errors.Is(err, ErrTopicNotFound) {
		t.Fatalf("missing topic: %v", err)
	}
}

// More partitions than one etcd transaction takes go in several; those an
// expand cut short stored before its last transaction are kept by the
// next one, which finishes it.
func TestExpandTopicBeyondOneTransaction(t *testing.T) {
	m, a := expandFixture(t, 2)
	ctx := context.Background()
	// An expand that stored partitions 2 and 3 in a transaction of their own
	// and died before its last one.
	early, _ := placeRound(TopicMeta{Name: "t"}, nil, []int32{2, 3})
	early[0].Leader, early[0].ISR = "b", []string{"b", "a"} // not what placeRound would say now
	for _, st := range early {
		mustCreatePartition(t, a, st)
	}
	if meta, _, _ := m.Topic(ctx, "t"); meta.Partitions != 2 {
		t.Fatalf("count before %d", meta.Partitions)
	}
	if _, err := m.ExpandTopic(ctx, a, "t", 300, placeRound); err != nil {
		t.Fatal(err)
	}
	meta, _, _ := m.Topic(ctx, "t")
	states, _ := a.List(ctx, "t")
	if meta.Partitions != 300 || len(states) != 300 {
		t.Fatalf("count %d, %d states", meta.Partitions, len(states))
	}
	if states[2].Leader != "b" {
		t.Fatalf("partition 2 placed again: %+v", states[2])
	}
}

// Of two expands at once, one stores its partitions; the other finds the
// topic grown, and fails or grows it further.
func TestConcurrentExpandsPlaceEachPartitionOnce(t *testing.T) {
	m, a := expandFixture(t, 2)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, errs[i] = m.ExpandTopic(ctx, a, "t", 8, placeRound) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, ErrPartitionsUnchanged):
			t.Fatalf("expand: %v", err)
		}
	}
	states, _ := a.List(ctx, "t")
	meta, _, _ := m.Topic(ctx, "t")
	if ok != 1 || len(states) != 8 || meta.Partitions != 8 {
		t.Fatalf("%d expands succeeded, %d states, count %d", ok, len(states), meta.Partitions)
	}
}
