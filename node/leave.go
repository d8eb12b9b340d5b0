package node

import (
	"context"
	"time"
)

// leaveEvery is how often a stopping node looks at its view for the
// leaderships still to move: often enough that it stops within a few
// milliseconds of the last move, and the count reads memory only.
const leaveEvery = 10 * time.Millisecond

// leaveMarkTimeout bounds the write of the leaving mark.
const leaveMarkTimeout = 2 * time.Second

// leaveQuiet is how long a stopping node that handed its leaderships off
// goes on serving after the last forward its peers sent it for them: a
// peer's watch delivering the moves late under load, and its forwards in
// flight at the moves, are answered and sent on, not cut off.
const leaveQuiet = 200 * time.Millisecond

// leave is a cluster node's controlled shutdown, as Kafka's: it marks its
// registration leaving, the controller moves every leadership another
// in-sync replica can take off it (each drained first, so none fails its
// writes, and what the node's clients publish meanwhile is forwarded to the
// new leaders), and it returns once its view shows none left, or after
// --shutdown-handoff. Whatever is left then fails over as after a stop
// without it: the node's replicas are untouched, and it leaves the ISRs
// when it stops.
func (n *Node) leave() {
	if n.cfg.ShutdownHandOff <= 0 || n.broker == nil {
		return
	}
	n.regMu.Lock()
	reg := n.reg
	n.regMu.Unlock()
	if reg == nil {
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ShutdownHandOff)
	defer cancel()
	if n.broker.LeadershipsToHandOff() == 0 {
		return
	}
	// etcd out of reach must not hold the stop for the whole wait.
	mctx, mcancel := context.WithTimeout(ctx, leaveMarkTimeout)
	err := reg.Leave(mctx)
	mcancel()
	if err != nil {
		n.log.Warn("stopping without handing leaderships off", "err", err)
		return
	}
	tick := time.NewTicker(leaveEvery)
	defer tick.Stop()
	for {
		left := n.broker.LeadershipsToHandOff()
		if left == 0 {
			break
		}
		select {
		case <-ctx.Done():
			n.log.Warn("stopping with leaderships not handed off; they fail over", "left", left, "waited", n.cfg.ShutdownHandOff)
			return
		case <-tick.C:
		}
	}
	handed := time.Since(start)
	// A peer whose view has not caught up with the moves still forwards
	// here, and a forward of its in flight at a move waits for this
	// node's answer while it is registered: both are answered, and sent on
	// to the new leaders, only while the node serves. So it stops once no
	// forward came for leaveQuiet.
	last, quiet := n.broker.MisdirectedForwards(), time.Now()
	for time.Since(quiet) < leaveQuiet {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if m := n.broker.MisdirectedForwards(); m != last {
			last, quiet = m, time.Now()
		}
	}
	n.log.Info("leaderships handed off before stopping", "took", handed.Round(time.Millisecond), "then_quiet_after", time.Since(start).Round(time.Millisecond))
}
