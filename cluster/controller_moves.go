package cluster

import (
	"context"
	"errors"
	"slices"
	"time"
)

// The controller's side of leader moves: it decides with the rules of
// leadermoves.go on its view of the partitions and stores the moves
// together, as it stores elections.

// askQueue is a term's operator requests: those pending, and for each
// partition the revision of the last one decided, since the watch may
// still show a request the controller has deleted.
type askQueue struct {
	pending []LeaderMoveAsk
	decided map[PartitionRef]int64
}

func newAskQueue() *askQueue { return &askQueue{decided: map[PartitionRef]int64{}} }

// seen takes the watch's pending requests, leaving out those decided.
func (q *askQueue) seen(asks []LeaderMoveAsk) {
	q.pending = slices.DeleteFunc(asks, func(a LeaderMoveAsk) bool { return a.Revision <= q.decided[a.Ref] })
}

func (q *askQueue) decide(ask LeaderMoveAsk) {
	q.decided[ask.Ref] = max(q.decided[ask.Ref], ask.Revision)
}

// carryOutAsks decides the pending requests, stores the moves and deletes
// every request decided; a request whose partition changed while its move
// was stored, or whose move gave way to a node's loss, stays pending for
// the next check.
func (c *Controller) carryOutAsks(ctx context.Context, view partitionView, live []NodeInfo, q *askQueue) {
	if len(q.pending) == 0 {
		return
	}
	if !c.refresh(ctx, view, q.pending) {
		return // etcd failed: the next check tries again
	}
	byRef := make(map[PartitionRef]LeaderMoveAsk, len(q.pending))
	for _, ask := range q.pending {
		byRef[ask.Ref] = ask
	}
	moves, refused := planAskedMoves(q.pending, view, nodeIDs(live))
	q.pending = nil
	for _, r := range refused {
		c.Logger.Warn("leader move refused", "topic", r.Ask.Ref.Topic, "partition", r.Ask.Ref.Partition, "from", r.Ask.From, "to", r.Ask.To, "err", r.Err)
		c.dropAsk(ctx, q, r.Ask)
	}
	for i, err := range c.storeMoves(ctx, view, live, moves) {
		ask := byRef[moves[i].Next.Ref()]
		if errors.Is(err, ErrConflict) || errors.Is(err, errGaveWay) {
			q.pending = append(q.pending, ask)
			continue
		}
		c.dropAsk(ctx, q, ask)
	}
}

// refresh reads the asked partitions' states into view: the watch may not
// have brought yet the change the asker saw, such as the target joining
// the ISR, and requests are few.
func (c *Controller) refresh(ctx context.Context, view partitionView, asks []LeaderMoveAsk) bool {
	for _, ask := range asks {
		st, found, err := c.Assignments.Get(ctx, ask.Ref.Topic, ask.Ref.Partition)
		if err != nil {
			return false
		}
		if !found {
			st = PartitionState{Topic: ask.Ref.Topic, Partition: ask.Ref.Partition} // deleted
		}
		view.apply(st)
	}
	return true
}

func (c *Controller) dropAsk(ctx context.Context, q *askQueue, ask LeaderMoveAsk) {
	q.decide(ask)
	if _, err := c.Assignments.DropLeaderMoveAsk(ctx, ask); err != nil && ctx.Err() == nil {
		c.Logger.Warn("deleting a decided leader move request", "topic", ask.Ref.Topic, "partition", ask.Ref.Partition, "err", err)
	}
}

// balanceLeaders gives leadership back to preferred replicas, at most
// LeaderBalanceMoves partitions; nodes in avoid get none.
func (c *Controller) balanceLeaders(ctx context.Context, view partitionView, live []NodeInfo, avoid map[string]bool) {
	c.storeMoves(ctx, view, live, planLeaderBalance(view.states(), nodeIDs(live), avoid, max(c.LeaderBalanceMoves, 1)))
}

// moveLeadersOff moves every leadership of the nodes of off to other live
// ISR members, for draining them; stuck are the partitions no other member
// may lead yet, whose drain move hands their leadership over once its
// target is in sync. A partition changed concurrently is moved at a later
// call.
func (c *Controller) moveLeadersOff(ctx context.Context, view partitionView, live []NodeInfo, off map[string]bool) (moved int, stuck []PartitionRef) {
	moves, stuck := planLeadersOff(view.states(), live, off)
	for _, err := range c.storeMoves(ctx, view, live, moves) {
		if err == nil {
			moved++
		}
	}
	return moved, stuck
}

// errGaveWay is the error of a move whose round gave way to a node's loss
// before it was stored (losses.go): it is planned again later.
var errGaveWay = errors.New("leader move gave way to a node's loss")

// storeMoves stores moves in few transactions and returns each one's
// error, once their old leaders drained or the hand-over wait passed
// (handover.go).
func (c *Controller) storeMoves(ctx context.Context, view partitionView, live []NodeInfo, moves []leaderMove) []error {
	if len(moves) == 0 {
		return nil
	}
	next := make([]PartitionState, len(moves))
	for i, m := range moves {
		next[i] = m.Next
	}
	errs := c.storeHandedOff(ctx, view, live, moves, next)
	moved := map[string]int{}
	for i, err := range errs {
		m := moves[i]
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errGaveWay) {
				c.Logger.Warn("moving a partition's leadership", "topic", m.Next.Topic, "partition", m.Next.Partition, "from", m.From, "to", m.Next.Leader, "reason", m.Reason, "err", err)
			}
			continue
		}
		moved[m.Reason]++
		c.Logger.Info("partition leadership moved", "topic", m.Next.Topic, "partition", m.Next.Partition, "from", m.From, "to", m.Next.Leader, "reason", m.Reason, "epoch", m.Next.EpochForWrite)
	}
	if c.ObserveLeaderMoves != nil {
		for reason, n := range moved {
			c.ObserveLeaderMoves(reason, n)
		}
	}
	return errs
}

// storeHandedOff stores next in few transactions once the old leaders of
// handOffs drained or the hand-over wait passed (handOffs[i] hands
// next[i]'s leadership off; a move with no From hands none off), and
// tells those old leaders of the moves not stored. It returns each
// state's error: errGaveWay for all when the round gave way to a node's
// loss, so that every one waits for a later check, the elections first.
func (c *Controller) storeHandedOff(ctx context.Context, view partitionView, live []NodeInfo, handOffs []leaderMove, next []PartitionState) []error {
	nodes := nodesByID(live)
	errs := make([]error, len(next))
	failed := make([]bool, len(next))
	defer c.notStored(handOffs, failed, nodes)
	if c.handOvers(ctx, handOffs, nodes) {
		for i := range errs {
			errs[i], failed[i] = errGaveWay, true
		}
		return errs
	}
	for i, res := range c.Assignments.CompareAndSwapAll(ctx, next) {
		view.stored(res)
		errs[i], failed[i] = res.Err, res.Err != nil
	}
	return errs
}

// optionalTicker is a time.Ticker, or one that never ticks for d <= 0.
type optionalTicker struct {
	C <-chan time.Time
	t *time.Ticker
}

func newOptionalTicker(d time.Duration) optionalTicker {
	if d <= 0 {
		return optionalTicker{}
	}
	t := time.NewTicker(d)
	return optionalTicker{C: t.C, t: t}
}

func (o optionalTicker) Stop() {
	if o.t != nil {
		o.t.Stop()
	}
}
