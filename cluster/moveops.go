package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RequestMove records a move on a partition for the controller to carry
// out (planMove), checked against the live nodes. A concurrent change of
// the partition makes it read and check again.
func (a *Assignments) RequestMove(ctx context.Context, ref PartitionRef, m Move) (PartitionState, error) {
	live, err := Nodes(ctx, a.cli, a.prefix)
	if err != nil {
		return PartitionState{}, err
	}
	for range maxSwapAttempts {
		st, ok, err := a.Get(ctx, ref.Topic, ref.Partition)
		if err != nil {
			return PartitionState{}, err
		}
		if !ok {
			return PartitionState{}, ErrPartitionNotFound
		}
		next, err := requestMove(st, m, nodeIDs(live))
		if err != nil {
			return st, err
		}
		stored, err := a.CompareAndSwap(ctx, next)
		if !errors.Is(err, ErrConflict) {
			return stored, err
		}
	}
	return PartitionState{}, fmt.Errorf("move in %s: %w", ref, ErrConflict)
}

// ChangeReplicaCount records on every partition of topic the move that
// brings it to r replicas (replicaCountMoves), placing none on a drained
// node; the controller carries them out. Partitions changed concurrently
// are planned again.
func (a *Assignments) ChangeReplicaCount(ctx context.Context, topic string, r int) error {
	live, err := Nodes(ctx, a.cli, a.prefix)
	if err != nil {
		return err
	}
	draining, err := a.Draining(ctx)
	if err != nil {
		return err
	}
	live = placeable(live, draining)
	for range maxSwapAttempts {
		states, err := a.List(ctx, "")
		if err != nil {
			return err
		}
		moves, err := replicaCountMoves(states, topic, r, live)
		if err != nil {
			return err
		}
		conflict := false
		for _, res := range a.CompareAndSwapAll(ctx, moves) {
			switch {
			case errors.Is(res.Err, ErrConflict):
				conflict = true
			case res.Err != nil:
				return res.Err
			}
		}
		if !conflict {
			return nil
		}
	}
	return fmt.Errorf("replica count of %q: %w", topic, ErrConflict)
}

// placements is a check's work on where replicas and leaderships are,
// given the nodes being drained: repairs, the drained nodes' leaderships
// moved off them before their replicas, the moves under way taken one
// step further, and the moves drains and the balance start.
func (c *Controller) placements(ctx context.Context, view partitionView, live []NodeInfo, keep *upkeep, balancedAt *time.Time) {
	draining, err := c.Assignments.Draining(ctx)
	if err != nil || !c.upgradeRead(ctx, keep) {
		if err != nil {
			c.Logger.Warn("reading drained nodes", "err", err)
		}
		c.moves(ctx, view, live)
		return
	}
	// Stopping nodes, like drained ones, lead nothing and are given no
	// replica; only drained ones have their replicas moved off.
	avoid := withLeaving(draining, live)
	c.repair(ctx, view, live, avoid, keep)
	if len(avoid) > 0 {
		c.moveLeadersOff(ctx, view, live, avoid)
	}
	c.moves(ctx, view, live)
	due := keep.balanceDue()
	if due {
		*balancedAt = time.Time{}
	}
	c.startMoves(ctx, view, live, draining, keep.mayBalance(), balancedAt)
	if due && c.LeaderBalanceInterval > 0 {
		c.balanceLeaders(ctx, view, live, avoid)
	}
}

// moves takes every partition's move one step further (planMove), storing
// the steps of a check together.
func (c *Controller) moves(ctx context.Context, view partitionView, live []NodeInfo) {
	var moving []PartitionState
	for _, st := range view {
		if st.Move.Active() {
			moving = append(moving, st)
		}
	}
	if len(moving) == 0 {
		return
	}
	isLive, leads := nodeIDs(live), leaderships(view.states())
	var next []PartitionState
	var steps []MoveStep
	// handOffs[i] is next[i]'s leader move when its step hands the
	// leadership off, the zero move (no old leader) otherwise.
	var handOffs []leaderMove
	for _, st := range moving {
		n, step := planMove(st, isLive, leads)
		if step == MoveWaiting {
			continue
		}
		var handOff leaderMove
		if step == MoveHandingOff {
			handOff = leaderMove{Next: n, From: st.Leader, Reason: MoveDrain}
		}
		next, steps, handOffs = append(next, n), append(steps, step), append(handOffs, handOff)
	}
	if len(next) == 0 {
		return
	}
	for i, err := range c.storeHandedOff(ctx, view, live, handOffs, next) {
		st := next[i]
		switch {
		case errors.Is(err, errGaveWay):
		case err != nil:
			c.Logger.Warn("replica move", "topic", st.Topic, "partition", st.Partition, "step", steps[i], "err", err)
		default:
			c.Logger.Info("replica move", "topic", st.Topic, "partition", st.Partition, "step", steps[i],
				"leader", st.Leader, "isr", st.ISR, "catchup", st.Catchup, "replicas", st.Replicas)
		}
	}
}

// startMoves starts the moves drains and the balance ask for, as many as
// MaxMoves leaves room for beside the moves under way: the drains' first,
// the balance's once every BalanceInterval.
func (c *Controller) startMoves(ctx context.Context, view partitionView, live []NodeInfo, draining map[string]bool, mayBalance bool, balancedAt *time.Time) {
	states := view.states()
	budget := c.MaxMoves
	if budget <= 0 {
		budget = DefaultMaxMoves
	}
	for _, st := range states {
		if st.Move.Active() {
			budget--
		}
	}
	if budget <= 0 {
		return
	}
	next := planDrain(states, live, draining, budget)
	reason := "drain"
	if len(next) == 0 && mayBalance && c.BalanceInterval > 0 && time.Since(*balancedAt) >= c.BalanceInterval {
		*balancedAt = time.Now()
		next, reason = planBalance(states, live, draining, budget), "balance"
	}
	for i, res := range c.Assignments.CompareAndSwapAll(ctx, next) {
		view.stored(res)
		st := next[i]
		if res.Err != nil {
			c.Logger.Warn("starting a replica move", "reason", reason, "topic", st.Topic, "partition", st.Partition, "err", res.Err)
			continue
		}
		c.Logger.Info("replica move started", "reason", reason, "topic", st.Topic, "partition", st.Partition, "add", st.Move.Add, "remove", st.Move.Remove)
	}
}
