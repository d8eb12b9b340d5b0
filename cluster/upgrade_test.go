package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"testing"
	"time"
)

// A rolling upgrade, check by check: while the mark is set no replica is
// repaired, however long a node stays away, and the balances wait; a
// leader that dies is still replaced. Once the upgrade ends the balances
// run at the next check, and a node still away gets a full RepairAfter
// from the end before its replicas are re-created elsewhere.
func TestUpkeepHeldDuringAnUpgrade(t *testing.T) {
	const repairAfter = 10 * time.Second
	states := []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, Replicas: 3, EpochForWrite: 1, Preferred: "a", Revision: 1},
		{Topic: "t", Partition: 1, Leader: "b", ISR: []string{"b", "c", "a"}, Replicas: 3, EpochForWrite: 1, Preferred: "b", Revision: 1},
	}
	steps := []struct {
		at        time.Duration
		upgrading bool
		live      string // the live nodes, one letter each
		// what the check decides
		repair   string // the nodes whose replicas are re-created, sorted
		balance  bool   // the balances may run
		due      bool   // the balances run at once
		failover string // the partitions needing a leader elected
	}{
		{at: 0, live: "abc", balance: true},
		{at: 1 * time.Second, upgrading: true, live: "abc"},
		{at: 2 * time.Second, upgrading: true, live: "ab", failover: ""},            // c restarts
		{at: 25 * time.Second, upgrading: true, live: "ab", failover: ""},           // away past RepairAfter
		{at: 26 * time.Second, upgrading: true, live: "abc"},                        // back
		{at: 27 * time.Second, upgrading: true, live: "bc", failover: "0"},          // a, leading, restarts: failover goes on
		{at: 40 * time.Second, upgrading: true, live: "bc", failover: "0"},          // still away
		{at: 41 * time.Second, live: "bc", balance: true, due: true, failover: "0"}, // upgrade done
		{at: 42 * time.Second, live: "bc", balance: true, failover: "0"},
		{at: 50 * time.Second, live: "bc", balance: true, failover: "0"},              // away 9 s since the end
		{at: 51 * time.Second, live: "bc", repair: "a", balance: true, failover: "0"}, // 10 s since the end
		{at: 60 * time.Second, live: "bc", repair: "a", balance: true, failover: "0"},
		{at: 61 * time.Second, upgrading: true, live: "bc", failover: "0"}, // a new upgrade holds it again
	}
	start := time.Unix(1_800_000_000, 0)
	keep := newUpkeep(repairAfter)
	for i, s := range steps {
		live := map[string]bool{}
		var nodes []NodeInfo
		for _, id := range s.live {
			live[string(id)] = true
			nodes = append(nodes, testNode(string(id)))
		}
		mark := Upgrade{}
		if s.upgrading {
			mark.Since = start.Add(time.Second)
		}
		keep.upgradeRead(mark)
		repair := slices.Sorted(maps.Keys(keep.repairFrom(slices.Values(states), live, start.Add(s.at))))
		var failover []string
		for _, st := range states {
			if needsLeader(st, live) {
				failover = append(failover, fmt.Sprint(st.Partition))
			}
		}
		got := fmt.Sprintf("repair %q balance %v due %v failover %q",
			repair, keep.mayBalance(), keep.balanceDue(), failover)
		want := fmt.Sprintf("repair %q balance %v due %v failover %q",
			splitNodes(s.repair), s.balance, s.due, splitNodes(s.failover))
		if got != want {
			t.Fatalf("step %d at %v: %s, want %s", i, s.at, got, want)
		}
		// What the check would do with that: repairs only from the nodes
		// named, the election of partition 0 among the live ISR members.
		if plans := planRepairs(states, nodes, nil, keep.repairFrom(slices.Values(states), live, start.Add(s.at))); len(repair) == 0 && len(plans) > 0 {
			t.Fatalf("step %d: repairs planned while held: %+v", i, plans)
		}
		if len(failover) > 0 {
			elected, failed := electLeaders(states[:1], electorate{live: live}, lastLogIDs{"b": {states[0].Ref(): 5}, "c": {states[0].Ref(): 7}})
			if len(failed) > 0 || elected[0].Leader != "c" {
				t.Fatalf("step %d: failover elected %+v, failed %+v, want c", i, elected, failed)
			}
		}
	}
}

func splitNodes(s string) []string {
	var out []string
	for _, c := range s {
		out = append(out, string(c))
	}
	return out
}

// The mark in etcd: beginning twice keeps the first date; ending reports
// whether there was one.
func TestUpgradeMarkInEtcd(t *testing.T) {
	assign, _, _ := newTestAssignments(t)
	ctx := context.Background()
	if u, err := assign.Upgrade(ctx); err != nil || u.Active() {
		t.Fatalf("before: %+v %v", u, err)
	}
	first := time.Unix(1_800_000_000, 5)
	if u, err := assign.BeginUpgrade(ctx, first); err != nil || !u.Since.Equal(first) {
		t.Fatalf("begin: %+v %v", u, err)
	}
	if u, err := assign.BeginUpgrade(ctx, first.Add(time.Hour)); err != nil || !u.Since.Equal(first) {
		t.Fatalf("begun again: %+v %v, want the first date", u, err)
	}
	if u, err := assign.Upgrade(ctx); err != nil || !u.Since.Equal(first) {
		t.Fatalf("read: %+v %v", u, err)
	}
	if ended, err := assign.EndUpgrade(ctx); err != nil || !ended {
		t.Fatalf("end: %v %v", ended, err)
	}
	if ended, err := assign.EndUpgrade(ctx); err != nil || ended {
		t.Fatalf("ended again: %v %v, want false", ended, err)
	}
	if u, err := assign.Upgrade(ctx); err != nil || u.Active() {
		t.Fatalf("after: %+v %v", u, err)
	}
}

// The controller on a real etcd: during an upgrade it elects a leader for
// a partition whose leader is gone, but neither repairs the gone node's
// replicas nor gives leadership back to a preferred replica; once the
// upgrade ends it does both.
func TestControllerHoldsRepairAndBalanceDuringAnUpgrade(t *testing.T) {
	assign, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	if _, err := assign.BeginUpgrade(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, st := range []PartitionState{
		{Topic: "u", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 1, Replicas: 3, Preferred: "a"}, // a gone: failover
		{Topic: "u", Partition: 1, Leader: "c", ISR: []string{"c", "b"}, EpochForWrite: 1, Replicas: 2, Preferred: "b"},      // balance
	} {
		mustCreatePartition(t, assign, st)
	}
	for _, id := range []string{"b", "c", "d"} {
		mustRegister(t, cli, testNode(id))
	}
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), RepairAfter: 50 * time.Millisecond,
		LeaderBalanceInterval: 20 * time.Millisecond, LeaderBalanceMoves: 10,
		LastLogIDs: func(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
			ids := map[PartitionRef]int64{}
			for _, p := range parts {
				ids[p] = 1
			}
			return ids, nil
		},
	})
	get := func(p int32) PartitionState {
		st, _, err := assign.Get(ctx, "u", p)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if !eventually(t, 10*time.Second, func() bool { return get(0).Leader == "b" || get(0).Leader == "c" }) {
		t.Fatalf("no failover during the upgrade: %+v", get(0))
	}
	// Many times RepairAfter and the balance interval, and several checks:
	// every state stored meanwhile comes through the watch, which starts
	// with the states stored now.
	held, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
	defer cancel()
	for states := range assign.Watch(held, "u") {
		for _, st := range states {
			switch {
			case st.Partition == 0 && (slices.Contains(st.Catchup, "d") || !slices.Contains(slices.Concat(st.ISR, st.Catchup), "a")):
				t.Fatalf("replica of the gone node repaired during the upgrade: %+v", st)
			case st.Partition == 1 && st.Leader != "c":
				t.Fatalf("leadership balanced during the upgrade: %+v", st)
			}
		}
	}
	if _, err := assign.EndUpgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if !eventually(t, 10*time.Second, func() bool { return get(1).Leader == "b" }) {
		t.Fatalf("leadership not balanced once the upgrade ended: %+v", get(1))
	}
	if !eventually(t, 10*time.Second, func() bool { return slices.Contains(get(0).Catchup, "d") }) {
		t.Fatalf("the gone node's replica not repaired once the upgrade ended: %+v", get(0))
	}
}
