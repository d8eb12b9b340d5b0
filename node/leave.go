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
			n.log.Info("leaderships handed off before stopping", "took", time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			n.log.Warn("stopping with leaderships not handed off; they fail over", "left", left, "waited", n.cfg.ShutdownHandOff)
			return
		case <-tick.C:
		}
	}
}
