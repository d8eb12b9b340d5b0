package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Units of a reading: what done and total count.
const (
	unitMove     = "move"     // one move, its copy and its steps, done 0..1
	unitReplicas = "replicas" // moved off a draining node, those under way in part
	unitParts    = "partitions"
)

// reading is one poll of an operation under way.
type reading struct {
	at          time.Time
	done, total float64 // total 0: nothing measurable yet
	unit        string
	phase       string
	// copied of copyTotal bytes of the leader's log a move's target holds
	// while it catches up; copyTotal 0 when not known.
	copied, copyTotal int64
}

// progress is what the bar and the plain lines show.
type progress struct {
	fraction          float64       // 0..1
	eta               time.Duration // <0: not known
	pace              float64       // units a second what is left closes at; 0: not known
	done, total       float64
	unit              string
	phase             string
	copied, copyTotal int64
}

// measure compares the first reading of the current unit with the latest:
// the fraction is the latest's, the ETA what is left at the pace since the
// first. What is left, not what is done, sets the pace, so a leader still
// taking writes while its replica catches up slows the estimate as it
// should. When the gap did not close since the first reading, the pace
// last measured (known, 0 for none) stands in: once a pace is known an
// ETA is always shown, and it is at least a second until the end.
func measure(first, cur reading, known float64) progress {
	p := progress{eta: -1, done: cur.done, total: cur.total, unit: cur.unit, phase: cur.phase, copied: cur.copied, copyTotal: cur.copyTotal}
	if cur.total <= 0 {
		return p
	}
	p.fraction = min(max(cur.done/cur.total, 0), 1)
	left := max(cur.total-cur.done, 0)
	if left == 0 {
		p.eta = 0
		return p
	}
	elapsed := cur.at.Sub(first.at)
	closed := (first.total - first.done) - left
	p.pace = known
	if first.unit == cur.unit && elapsed > 0 && closed > 0 {
		p.pace = closed / elapsed.Seconds()
	}
	if p.pace > 0 {
		p.eta = max(time.Duration(left/p.pace*float64(time.Second)).Round(time.Second), time.Second)
	}
	return p
}

// A move's share of its whole at each step. The copy takes nearly all
// of a move's time; handing off and removing take a controller check or
// two each.
const (
	copyShare     = 0.9
	handOffShare  = 0.93
	removingShare = 0.96
)

// moveDone is how much of a move is done at phase, the copy counted by
// the bytes the target holds (copyTotal 0: not known yet, none counted).
func moveDone(phase string, copied, copyTotal int64) float64 {
	switch phase {
	case phaseDone:
		return 1
	case phaseRemoving:
		return removingShare
	case phaseHandOff:
		return handOffShare
	case phaseAdding:
		if copyTotal > 0 {
			return copyShare * min(float64(copied)/float64(copyTotal), 1)
		}
	}
	return 0
}

// barWidth is the bar's cells, leaving room for the figures on 80 columns.
const barWidth = 24

// bar draws p on one terminal line.
func bar(p progress) string {
	filled := int(p.fraction*barWidth + 0.5)
	return fmt.Sprintf("[%s%s] %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), figures(p))
}

// figures is p in words: percentage, amounts, ETA and phase.
func figures(p progress) string {
	var parts []string
	if p.total > 0 {
		parts = append(parts, fmt.Sprintf("%3.0f%%", p.fraction*100))
		if a := amount(p); a != "" {
			parts = append(parts, a)
		}
	}
	if p.eta > 0 {
		parts = append(parts, "eta "+p.eta.String())
	}
	if p.phase != "" {
		parts = append(parts, p.phase)
	}
	return strings.Join(parts, "  ")
}

// amount is what is done in the unit's words: a move's bytes copied while
// its target catches up, whole replicas and partitions.
func amount(p progress) string {
	if p.unit == unitMove {
		if p.copyTotal > 0 && p.phase == phaseAdding {
			return size(p.copied) + "/" + size(p.copyTotal) + " copied"
		}
		return ""
	}
	return fmt.Sprintf("%d/%d %s", int64(p.done), int64(p.total), p.unit)
}

// size is a byte count in binary units, as the node's docs give rates.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Move phases, as the controller's steps show in /lookup.
const (
	phaseAdding    = "adding"      // the target catches up
	phaseHandOff   = "handing off" // the source leads and gives leadership away
	phaseRemoving  = "removing"    // the source leaves
	phaseDone      = "done"
	phaseRollBack  = "rolled back" // the target left; the source stays
	phaseCatchUp   = "catching up"
	phaseMoving    = "moving"
	phaseDraining  = "draining"
	phaseRemovable = "removable"
)

// moveStep is where a move of a replica from one node to another stands
// in a partition's state, and the step's number of three.
func moveStep(st partitionState, from, to string) (phase string, step int64) {
	inISR, catching := slices.Contains(st.ISR, to), slices.Contains(st.Catchup, to)
	fromHeld := slices.Contains(st.ISR, from) || slices.Contains(st.Catchup, from)
	moving := len(st.MovingIn) > 0 || len(st.MovingOut) > 0
	switch {
	case !moving && inISR && !fromHeld:
		return phaseDone, 3
	case !moving && !inISR && !catching:
		return phaseRollBack, 0
	case catching || !inISR:
		return phaseAdding, 0
	case st.Leader == from:
		return phaseHandOff, 1
	default:
		return phaseRemoving, 2
	}
}

// settled says whether a partition has reached replicas replicas, all in
// sync, with no move under way.
func settled(st partitionState, replicas int) bool {
	return st.Replicas == replicas && len(st.ISR) == replicas && len(st.Catchup) == 0 &&
		len(st.MovingIn) == 0 && len(st.MovingOut) == 0
}

// replicasReading counts a topic's partitions settled at replicas.
func replicasReading(at time.Time, parts []partitionState, replicas int) reading {
	r := reading{at: at, total: float64(len(parts)), unit: unitParts, phase: phaseMoving}
	for _, st := range parts {
		if settled(st, replicas) {
			r.done++
		}
		if len(st.Catchup) > 0 {
			r.phase = phaseCatchUp
		}
	}
	if r.done == r.total {
		r.phase = phaseDone
	}
	return r
}

// drainReading is a draining node's replicas moved off, of those it held
// when the drain was first seen, with what is done of each move under way
// off it (underWay, each below 1: the node holds the replica until the
// move ends), so the copies show before the first replica leaves.
func drainReading(at time.Time, n nodeEntry, held int, underWay []float64) reading {
	r := reading{at: at, done: float64(max(held-n.Replicas, 0)), total: float64(held), unit: unitReplicas, phase: phaseDraining}
	for _, d := range underWay {
		r.done += min(d, 1)
	}
	r.done = min(r.done, r.total)
	if n.Removable {
		r.done, r.phase = r.total, phaseRemovable
	}
	return r
}
