package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Units of a reading: what done and total count.
const (
	unitBytes    = "bytes"    // of the leader's log the target holds
	unitReplicas = "replicas" // moved off a draining node
	unitParts    = "partitions"
	unitSteps    = "steps" // of a move: adding, handing off, removing
)

// reading is one poll of an operation under way.
type reading struct {
	at          time.Time
	done, total int64 // total 0: nothing measurable yet
	unit        string
	phase       string
}

// progress is what the bar and the plain lines show.
type progress struct {
	fraction    float64       // 0..1
	eta         time.Duration // <0: not known
	done, total int64
	unit        string
	phase       string
}

// measure compares the first reading of the current unit with the latest:
// the fraction is the latest's, the ETA what is left at the pace since the
// first. What is left, not what is done, sets the pace, so a leader still
// taking writes while its replica catches up slows the estimate as it
// should; a gap that did not close gives no ETA.
func measure(first, cur reading) progress {
	p := progress{eta: -1, done: cur.done, total: cur.total, unit: cur.unit, phase: cur.phase}
	if cur.total <= 0 {
		return p
	}
	p.fraction = min(max(float64(cur.done)/float64(cur.total), 0), 1)
	left := max(cur.total-cur.done, 0)
	if left == 0 {
		p.eta = 0
		return p
	}
	elapsed := cur.at.Sub(first.at)
	closed := (first.total - first.done) - left
	if first.unit != cur.unit || elapsed <= 0 || closed <= 0 {
		return p
	}
	p.eta = time.Duration(float64(elapsed) * float64(left) / float64(closed)).Round(time.Second)
	return p
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
		parts = append(parts, fmt.Sprintf("%3.0f%%", p.fraction*100), amount(p))
	}
	if p.eta > 0 {
		parts = append(parts, "eta "+p.eta.String())
	}
	if p.phase != "" {
		parts = append(parts, p.phase)
	}
	return strings.Join(parts, "  ")
}

func amount(p progress) string {
	if p.unit == unitBytes {
		return size(p.done) + "/" + size(p.total)
	}
	return fmt.Sprintf("%d/%d %s", p.done, p.total, p.unit)
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
	r := reading{at: at, total: int64(len(parts)), unit: unitParts, phase: phaseMoving}
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
// when the drain was first seen.
func drainReading(at time.Time, n nodeEntry, held int) reading {
	r := reading{at: at, done: int64(max(held-n.Replicas, 0)), total: int64(held), unit: unitReplicas, phase: phaseDraining}
	if n.Removable {
		r.done, r.phase = r.total, phaseRemovable
	}
	return r
}
