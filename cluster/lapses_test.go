package cluster

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A leader whose registration lapsed keeps its partitions while this
// node's session to it is up, for at most the grace; one not heard, or
// heard only after its grace, does not; registered again, it is
// forgotten, and a later lapse gets a grace of its own. Pure: the clock
// and the sessions are the test's.
func TestLapsedLeaderHeardKeepsItsPartitionsForTheGrace(t *testing.T) {
	const grace = 5 * time.Second
	t0 := time.Unix(1000, 0)
	states := []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a"},
		{Topic: "t", Partition: 1, Leader: "b"},
		{Topic: "t", Partition: 2, Leader: "c"},
		{Topic: "t", Partition: 3},
	}
	heard := map[string]bool{"a": true, "c": true}
	hears := func(n string) bool { return heard[n] }
	l := newLapses(grace)
	step := func(at time.Duration, registered map[string]bool, wantSpared []string, wantNewly []string) {
		t.Helper()
		spared, newly := l.spare(slices.Values(states), registered, hears, t0.Add(at))
		if got := slices.Sorted(maps.Keys(spared)); !slices.Equal(got, wantSpared) {
			t.Fatalf("at %v: spared %v, want %v", at, got, wantSpared)
		}
		var got []string
		for _, s := range newly {
			got = append(got, s.Node)
			if want := t0.Add(grace); s.Node == "a" && !s.Until.Equal(want) && at == 0 {
				t.Fatalf("a spared until %v, want %v", s.Until, want)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, wantNewly) {
			t.Fatalf("at %v: newly spared %v, want %v", at, got, wantNewly)
		}
	}
	// c is registered; a (heard) and b (silent) are not.
	step(0, map[string]bool{"c": true}, []string{"a"}, []string{"a"})
	step(grace-time.Millisecond, map[string]bool{"c": true}, []string{"a"}, nil)
	// b is heard from only now, 3 s into its lapse: 2 s of grace left.
	heard["b"] = true
	step(3*time.Second, map[string]bool{"c": true}, []string{"a", "b"}, []string{"b"})
	step(grace, map[string]bool{"c": true}, nil, nil)
	// a registers again and lapses later: a new grace.
	step(6*time.Second, map[string]bool{"a": true, "c": true}, nil, nil)
	step(7*time.Second, map[string]bool{"c": true}, []string{"a"}, []string{"a"})
	// Its session breaks: no proof of life, no grace left to wait.
	heard["a"] = false
	step(7*time.Second+time.Millisecond, map[string]bool{"c": true}, nil, nil)
	// No grace at all: a lapsed leader is dead, as a node without
	// sessions is.
	if spared, _ := newLapses(0).spare(slices.Values(states), map[string]bool{}, func(string) bool { return true }, t0); len(spared) != 0 {
		t.Fatalf("spared %v with no grace", spared)
	}
	if spared, _ := newLapses(grace).spare(slices.Values(states), map[string]bool{}, nil, t0); len(spared) != 0 {
		t.Fatalf("spared %v without a way to hear from nodes", spared)
	}
}

// The controller leaves the partitions of a leader whose registration
// lapsed but that is heard with that leader, and elects new leaders once
// it is not heard any more; heard for longer than the grace, it is failed
// over all the same.
func TestControllerSparesALapsedLeaderItHears(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
		stops bool // the leader stops being heard
	}{
		{"silenced", time.Hour, true},
		{"grace ends", 1500 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cli := newTestStore(t)
			assign := NewAssignments(cli, "")
			ctx := context.Background()
			if _, _, err := assign.Create(ctx, PartitionState{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "b", "c"}, EpochForWrite: 4, Replicas: 3}); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, cli, testNode("b"))
			mustRegister(t, cli, testNode("c"))
			var heard atomic.Bool
			var asked atomic.Int64 // each check asks of a, as long as it is a lapsed leader
			heard.Store(true)
			logs := &spareLog{}
			start := time.Now()
			runUntilStopped(t, &Controller{
				Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
				Logger: slog.New(logs),
				Heard: func(n string) bool {
					asked.Add(1)
					return n == "a" && heard.Load()
				},
				LapseGrace: tc.grace,
				LastLogIDs: func(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
					ids := map[PartitionRef]int64{}
					for _, p := range parts {
						ids[p] = 7
					}
					return ids, nil
				},
			})
			if !eventually(t, 10*time.Second, logs.spared) {
				t.Fatal("the controller never spared the lapsed leader")
			}
			// Two more checks decided about a, and kept it.
			checks := asked.Load()
			if !eventually(t, 10*time.Second, func() bool { return asked.Load() >= checks+2 }) {
				t.Fatal("the controller stopped checking")
			}
			if st, _, _ := assign.Get(ctx, "t", 0); st.Leader != "a" && tc.stops {
				t.Fatalf("a heard leader failed over within its grace: %+v", st)
			}
			if tc.stops {
				heard.Store(false)
			}
			var st PartitionState
			if !eventually(t, 10*time.Second, func() bool {
				st, _, _ = assign.Get(ctx, "t", 0)
				return st.Leader != "a"
			}) {
				t.Fatal("the lapsed leader kept its partition")
			}
			if !tc.stops && time.Since(start) < tc.grace {
				t.Fatalf("failed over %v after the controller started, within the grace of %v", time.Since(start), tc.grace)
			}
			if !slices.Equal(st.ISR, []string{"b", "c"}) || st.EpochForWrite != 5 {
				t.Fatalf("after failover: %+v, want ISR [b c] at epoch 5", st)
			}
		})
	}
}

// spareLog is a slog.Handler that notes the controller's warning that it
// spared a lapsed leader.
type spareLog struct {
	mu     sync.Mutex
	warned bool
}

func (h *spareLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *spareLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "keep their leader") {
		h.mu.Lock()
		h.warned = true
		h.mu.Unlock()
	}
	return nil
}
func (h *spareLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *spareLog) WithGroup(string) slog.Handler      { return h }
func (h *spareLog) spared() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.warned
}

// The controller is proof of its own life: when its own registration
// lapses, the partitions it leads keep it, while those of a lapsed node it
// does not hear fail over in the same check.
func TestControllerSparesItsOwnLapsedPartitions(t *testing.T) {
	_, cli := newTestStore(t)
	assign := NewAssignments(cli, "")
	ctx := context.Background()
	for _, st := range []PartitionState{
		{Topic: "t", Partition: 0, Leader: "a", ISR: []string{"a", "c"}, EpochForWrite: 2, Replicas: 2},
		{Topic: "t", Partition: 1, Leader: "b", ISR: []string{"b", "c"}, EpochForWrite: 3, Replicas: 2},
	} {
		if _, _, err := assign.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	mustRegister(t, cli, testNode("c")) // b, the controller, is not registered
	logs := &spareLog{}
	runUntilStopped(t, &Controller{
		Client: cli, Prefix: DefaultMetaPrefix, NodeID: "b", Assignments: assign, TTL: time.Second,
		Logger: slog.New(logs), Heard: func(string) bool { return false }, LapseGrace: time.Hour,
		LastLogIDs: func(_ context.Context, n NodeInfo, parts []PartitionRef) (map[PartitionRef]int64, error) {
			ids := map[PartitionRef]int64{}
			for _, p := range parts {
				ids[p] = 1
			}
			return ids, nil
		},
	})
	if !eventually(t, 10*time.Second, func() bool {
		st, _, _ := assign.Get(ctx, "t", 0)
		return st.Leader == "c"
	}) {
		t.Fatal("the partition of a lapsed node not heard was not failed over")
	}
	if st, _, _ := assign.Get(ctx, "t", 1); st.Leader != "b" || st.EpochForWrite != 3 {
		t.Fatalf("the controller's own partition failed over while it runs: %+v", st)
	}
	if !logs.spared() {
		t.Fatal("the controller did not say it kept its own partitions")
	}
}
