package broker

import "testing"

// An expand lengthens a topic's partitions without touching the replicas
// it had: a reader holding the old list and one taking the new see the
// same slot for an old partition.
func TestTopicGrowsKeepingItsReplicas(t *testing.T) {
	tp := &Topic{Name: "t"}
	tp.slots.Store(newSlots(2))
	old := tp.slot(1)
	old.leads.Store(true)
	if !tp.grow(6) || tp.NumPartitions() != 6 || tp.slot(1) != old || !tp.Leads(1) {
		t.Fatalf("after growing: %d partitions, slot 1 kept %v", tp.NumPartitions(), tp.slot(1) == old)
	}
	if tp.Partition(5) != nil || tp.Leads(5) || tp.slot(6) != nil {
		t.Fatal("a new partition has a replica here before one is started")
	}
	if tp.grow(3) || tp.NumPartitions() != 6 {
		t.Fatal("a topic shrank")
	}
}
