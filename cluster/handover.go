package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A planned leader move fails none of the old leader's writes when the
// old leader drains first: the controller tells it which of its
// leaderships are about to move, it holds their writes until none is in
// flight, and only then does the controller store the moves. What
// queued behind the hold goes on to the new leaders, never written on the
// old one. The controller waits at most HandOverWait; a leader that does
// not answer in time, or at all, is moved as before, its writes in
// flight failing.

// PlannedMove is one leadership about to move off its node, in the epoch
// the controller saw it led in.
type PlannedMove struct {
	Ref   PartitionRef
	Epoch int64
}

// DefaultHandOverWait bounds how long the controller waits for the old
// leaders to drain before it stores a round of moves: its loop waits
// behind it, but for a node's loss, which ends the wait (losses.go).
const DefaultHandOverWait = 500 * time.Millisecond

// handOvers asks every old leader of moves, in parallel, to drain the
// leaderships about to move, and waits for their answers within the
// hand-over wait. Nothing is asked without a HandOver hook. It gives way
// (true) when a node is lost before the answers are in (losses.go): the
// moves must not be stored then, so that the loop elects first.
func (c *Controller) handOvers(ctx context.Context, moves []leaderMove, nodes map[string]NodeInfo) (gaveWay bool) {
	if c.HandOver == nil {
		return false
	}
	byNode := plannedByNode(moves, nil)
	if len(byNode) == 0 {
		return false
	}
	asked := 0
	for _, planned := range byNode {
		asked += len(planned)
	}
	lost := c.feed.losses()
	select {
	case <-lost:
		// Lost before the round began: no leader is asked to hold.
		c.gaveWay(asked)
		return true
	default:
	}
	drained, gave := c.drain(ctx, byNode, nodes, lost)
	if gave {
		c.gaveWay(asked)
		return true
	}
	if c.ObserveHandOvers != nil {
		c.ObserveHandOvers(HandOverRound{Drained: drained, NotDrained: asked - drained})
	}
	return false
}

// drain asks the old leaders of byNode to drain and waits for their
// answers, until the hand-over wait ends or lost closes (gave).
func (c *Controller) drain(ctx context.Context, byNode map[string][]PlannedMove, nodes map[string]NodeInfo, lost <-chan struct{}) (drained int, gave bool) {
	wait := c.HandOverWait
	if wait <= 0 {
		wait = DefaultHandOverWait
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var gaveWay atomic.Bool
	answered := make(chan struct{})
	defer close(answered)
	go func() {
		select {
		case <-lost:
			gaveWay.Store(true)
			cancel()
		case <-answered:
		}
	}()
	var wg sync.WaitGroup
	var n atomic.Int64
	for id, planned := range byNode {
		node, ok := nodes[id]
		if !ok {
			continue
		}
		wg.Go(func() {
			d, err := c.HandOver(ctx, node, planned)
			n.Add(int64(d))
			if d < len(planned) {
				c.Logger.Info("old leader did not drain before its leaderships moved", "node", id, "partitions", len(planned), "drained", d, "err", err)
			}
		})
	}
	wg.Wait()
	return int(n.Load()), gaveWay.Load()
}

// HandOverRound is what became of one round's leaderships asked to
// drain: drained (none of their writes in flight when stored), not
// drained (moved with writes in flight), or given way to a node's loss
// (not stored; planned again by a later round).
type HandOverRound struct {
	Drained, NotDrained, GaveWay int
}

// gaveWay reports a round of asked leaderships that gave way.
func (c *Controller) gaveWay(asked int) {
	c.Logger.Info("leader moves give way to a node's loss: elections first", "partitions", asked)
	if c.ObserveHandOvers != nil {
		c.ObserveHandOvers(HandOverRound{GaveWay: asked})
	}
}

// plannedByNode groups moves, those of only (moves[i] where only[i]; every
// one when nil), by the node they move off.
func plannedByNode(moves []leaderMove, only []bool) map[string][]PlannedMove {
	byNode := map[string][]PlannedMove{}
	for i, m := range moves {
		if m.From == "" || only != nil && !only[i] {
			continue
		}
		// handOver gives the next state the epoch after the one led in.
		byNode[m.From] = append(byNode[m.From], PlannedMove{Ref: m.Next.Ref(), Epoch: m.Next.EpochForWrite - 1})
	}
	return byNode
}

func nodesByID(live []NodeInfo) map[string]NodeInfo {
	nodes := make(map[string]NodeInfo, len(live))
	for _, n := range live {
		nodes[n.ID] = n
	}
	return nodes
}

// notStored tells the old leaders of moves whose store failed (failed[i]
// for moves[i]) that those moves are off, in the background: their holds
// end now rather than when they lapse, and the controller does not wait.
func (c *Controller) notStored(moves []leaderMove, failed []bool, nodes map[string]NodeInfo) {
	if c.HandOver == nil || c.MovesNotStored == nil {
		return
	}
	for id, planned := range plannedByNode(moves, failed) {
		n, ok := nodes[id]
		if !ok {
			continue
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), notStoredWait)
			defer cancel()
			if err := c.MovesNotStored(ctx, n, planned); err != nil {
				c.Logger.Info("telling an old leader its moves were not stored", "node", id, "partitions", len(planned), "err", err)
			}
		}()
	}
}

// notStoredWait bounds telling an old leader its moves were not stored;
// its holds lapse on their own anyway.
const notStoredWait = 2 * time.Second
