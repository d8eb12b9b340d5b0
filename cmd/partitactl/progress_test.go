package main

import (
	"strings"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	// rd is a reading s seconds in: done of total in unit.
	rd := func(s int, done, total float64, unit string) reading {
		return reading{at: t0.Add(time.Duration(s) * time.Second), done: done, total: total, unit: unit}
	}
	for _, tc := range []struct {
		name         string
		first, cur   reading
		known        float64 // the pace measured before
		wantFraction float64
		wantETA      time.Duration
	}{
		{"nothing measurable yet", rd(0, 0, 0, unitMove), rd(5, 0, 0, unitMove), 0, 0, -1},
		{"one reading gives a fraction, no pace", rd(0, 25, 100, unitReplicas), rd(0, 25, 100, unitReplicas), 0, 0.25, -1},
		{"a steady catch-up of a still leader", rd(0, 0, 100, unitReplicas), rd(10, 40, 100, unitReplicas), 0, 0.4, 15 * time.Second},
		{"the leader's writes slow the gap's closing", rd(0, 0, 100, unitReplicas), rd(10, 60, 120, unitReplicas), 0, 0.5, 15 * time.Second},
		{"a gap that widens and no pace known: no ETA", rd(0, 0, 100, unitReplicas), rd(10, 10, 200, unitReplicas), 0, 0.05, -1},
		{"a gap that widens keeps the pace measured before", rd(0, 0, 100, unitReplicas), rd(10, 10, 200, unitReplicas), 19, 0.05, 10 * time.Second},
		{"caught up", rd(0, 0, 100, unitReplicas), rd(3, 100, 100, unitReplicas), 0, 1, 0},
		{"a target read ahead of a stale leader reading is full, not more", rd(0, 0, 100, unitReplicas), rd(3, 130, 100, unitReplicas), 0, 1, 0},
		{"replicas drained at a pace", rd(0, 0, 12, unitReplicas), rd(6, 3, 12, unitReplicas), 0, 0.25, 18 * time.Second},
		{"the last step of a fast move shows a second, not nothing", rd(0, 0, 1, unitMove), rd(10, 0.96, 1, unitMove), 0, 0.96, time.Second},
		{"a change of unit restarts the pace, the one known stands in", rd(0, 0, 3, unitParts), rd(6, 50, 100, unitReplicas), 5, 0.5, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := measure(tc.first, tc.cur, tc.known)
			if p.fraction != tc.wantFraction || p.eta != tc.wantETA {
				t.Fatalf("measure = fraction %v eta %v, want %v %v", p.fraction, p.eta, tc.wantFraction, tc.wantETA)
			}
		})
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		p    progress
		want string
	}{
		{progress{fraction: 0.45, eta: 15 * time.Second, done: 0.45, total: 1, copied: 3 << 20, copyTotal: 6 << 20, unit: unitMove, phase: phaseAdding},
			"[###########.............]  45%  3.0 MiB/6.0 MiB copied  eta 15s  adding"},
		{progress{fraction: 0.96, eta: time.Second, done: 0.96, total: 1, copied: 6 << 20, copyTotal: 6 << 20, unit: unitMove, phase: phaseRemoving},
			"[#######################.]  96%  eta 1s  removing"},
		{progress{fraction: 1, eta: 0, done: 12, total: 12, unit: unitReplicas, phase: phaseRemovable},
			"[########################] 100%  12/12 replicas  removable"},
		{progress{eta: -1, phase: phaseDraining},
			"[........................] draining"},
	} {
		if got := bar(tc.p); got != tc.want {
			t.Errorf("bar(%+v)\n got %q\nwant %q", tc.p, got, tc.want)
		}
	}
	if got := withoutETA(progress{fraction: 0.5, eta: time.Minute, done: 1, total: 2, unit: unitParts}); strings.Contains(got, "eta") {
		t.Errorf("withoutETA kept the ETA: %q", got)
	}
}

func TestMoveStep(t *testing.T) {
	for _, tc := range []struct {
		name      string
		st        partitionState
		wantPhase string
		wantStep  int64
	}{
		{"the target catches up",
			partitionState{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, Catchup: []string{"n4"}, MovingIn: []string{"n4"}, MovingOut: []string{"n2"}},
			phaseAdding, 0},
		{"the target is asked for and not yet catching up",
			partitionState{Leader: "n1", ISR: []string{"n1", "n2", "n3"}, MovingIn: []string{"n4"}, MovingOut: []string{"n2"}},
			phaseAdding, 0},
		{"the source leads and hands off",
			partitionState{Leader: "n2", ISR: []string{"n1", "n2", "n3", "n4"}, MovingIn: []string{"n4"}, MovingOut: []string{"n2"}},
			phaseHandOff, 1},
		{"the source, a follower, leaves",
			partitionState{Leader: "n1", ISR: []string{"n1", "n2", "n3", "n4"}, MovingIn: []string{"n4"}, MovingOut: []string{"n2"}},
			phaseRemoving, 2},
		{"done",
			partitionState{Leader: "n1", ISR: []string{"n1", "n3", "n4"}},
			phaseDone, 3},
		{"the target died and the move was undone",
			partitionState{Leader: "n1", ISR: []string{"n1", "n2", "n3"}},
			phaseRollBack, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			phase, step := moveStep(tc.st, "n2", "n4")
			if phase != tc.wantPhase || step != tc.wantStep {
				t.Fatalf("moveStep = %q %d, want %q %d", phase, step, tc.wantPhase, tc.wantStep)
			}
		})
	}
}

// A move's copy counts for most of it, each step after it for a little:
// what is done only grows from one phase to the next.
func TestMoveDone(t *testing.T) {
	steps := []struct {
		phase             string
		copied, copyTotal int64
		want              float64
	}{
		{phaseAdding, 0, 0, 0}, // the leader's log not read yet
		{phaseAdding, 0, 100, 0},
		{phaseAdding, 50, 100, 0.45},
		{phaseAdding, 150, 100, 0.9}, // read ahead of a stale leader reading
		{phaseHandOff, 0, 0, 0.93},
		{phaseRemoving, 0, 0, 0.96},
		{phaseDone, 0, 0, 1},
	}
	prev := -1.0
	for _, s := range steps {
		got := moveDone(s.phase, s.copied, s.copyTotal)
		if got != s.want || got < prev {
			t.Fatalf("moveDone(%s, %d/%d) = %v, want %v, not below %v", s.phase, s.copied, s.copyTotal, got, s.want, prev)
		}
		prev = got
	}
	if got := moveDone(phaseRollBack, 0, 0); got != 0 {
		t.Fatalf("a rolled-back move is %v done, want 0", got)
	}
}

func TestReplicasAndDrainReadings(t *testing.T) {
	now := time.Now()
	parts := []partitionState{
		{Replicas: 3, ISR: []string{"n1", "n2", "n3"}},
		{Replicas: 3, ISR: []string{"n1", "n2"}, Catchup: []string{"n3"}, MovingIn: []string{"n3"}},
		{Replicas: 1, ISR: []string{"n2"}},
	}
	r := replicasReading(now, parts, 3)
	if r.done != 1 || r.total != 3 || r.phase != phaseCatchUp {
		t.Fatalf("replicas reading %+v, want 1 of 3 settled, catching up", r)
	}
	if r := replicasReading(now, parts[:1], 3); r.done != 1 || r.phase != phaseDone {
		t.Fatalf("replicas reading %+v, want done", r)
	}
	if r := drainReading(now, nodeEntry{Replicas: 2, Draining: true}, 5, nil); r.done != 3 || r.total != 5 || r.phase != phaseDraining {
		t.Fatalf("drain reading %+v, want 3 of 5 moved", r)
	}
	if r := drainReading(now, nodeEntry{Replicas: 2, Draining: true}, 5, []float64{0.45, 0.96}); r.done != 3+0.45+0.96 || r.total != 5 {
		t.Fatalf("drain reading %+v, want 3 of 5 moved and two moves under way in part", r)
	}
	if r := drainReading(now, nodeEntry{Draining: true, Removable: true}, 5, nil); r.done != 5 || r.phase != phaseRemovable {
		t.Fatalf("drain reading %+v, want all moved, removable", r)
	}
}

func TestLogEndOf(t *testing.T) {
	text := `# HELP partita_partition_log_end_bytes Committed end offset of the partition log.
# TYPE partita_partition_log_end_bytes gauge
partita_partition_log_end_bytes{node="n1",partition="0",topic="orders"} 1024
partita_partition_log_end_bytes{node="n1",partition="1",topic="orders"} 2048
partita_partition_log_end_bytes{node="n1",partition="1",topic="other"} 7
`
	if n, ok := logEndOf(strings.NewReader(text), "orders", 1); !ok || n != 2048 {
		t.Fatalf("logEndOf orders/1 = %d %v, want 2048", n, ok)
	}
	if _, ok := logEndOf(strings.NewReader(text), "orders", 2); ok {
		t.Fatal("logEndOf found a partition the node does not hold")
	}
}
