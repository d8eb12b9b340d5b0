package cluster

import (
	"context"
	"log/slog"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Controller is the one node, elected through etcd, that moves partition
// leadership off nodes whose registration lapsed (reference §3.4): for a
// partition whose leader is gone it picks the live ISR member with the
// largest last LogID, drops the dead members from the ISR and bumps
// EpochForWrite, by compare-and-swap. Every node runs one; only the
// elected one acts.
type Controller struct {
	Client      *clientv3.Client
	Prefix      string
	NodeID      string
	Assignments *Assignments
	// LastLogID asks a node for its last committed LogID of a partition.
	LastLogID func(ctx context.Context, node NodeInfo, topic string, partition int32) (int64, error)
	TTL       time.Duration // of the election session
	Logger    *slog.Logger
}

// Run campaigns until ctx ends, acting while elected.
func (c *Controller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := c.term(ctx); err != nil && ctx.Err() == nil {
			c.Logger.Warn("controller election", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// term is one campaign: win, act until the session is lost or ctx ends.
func (c *Controller) term(ctx context.Context) error {
	ttl := max(int(c.TTL.Seconds()), 1)
	sess, err := concurrency.NewSession(c.Client, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer sess.Close()
	election := concurrency.NewElection(sess, c.Prefix+"controller")
	if err := election.Campaign(ctx, c.NodeID); err != nil {
		return err
	}
	c.Logger.Info("elected controller", "node", c.NodeID)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-actx.Done():
		}
	}()
	check := time.NewTicker(5 * time.Second)
	defer check.Stop()
	nodes := WatchNodes(actx, c.Client, c.Prefix)
	var live []NodeInfo
	for {
		select {
		case <-actx.Done():
			return nil
		case ns, ok := <-nodes:
			if !ok {
				return nil
			}
			live = ns
		case <-check.C:
		}
		c.failover(actx, live)
	}
}

// failover elects a new leader for every partition whose leader is not
// live.
func (c *Controller) failover(ctx context.Context, live []NodeInfo) {
	byID := make(map[string]NodeInfo, len(live))
	for _, n := range live {
		byID[n.ID] = n
	}
	states, err := c.Assignments.List(ctx, "")
	if err != nil {
		return
	}
	for _, st := range states {
		if _, ok := byID[st.Leader]; ok || st.Leader == "" {
			continue
		}
		c.electLeader(ctx, st, byID)
	}
}

func (c *Controller) electLeader(ctx context.Context, st PartitionState, live map[string]NodeInfo) {
	var candidates []string
	for _, n := range st.ISR {
		if _, ok := live[n]; ok {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		c.Logger.Error("partition has no live ISR member to lead it", "topic", st.Topic, "partition", st.Partition, "isr", st.ISR)
		return
	}
	best, bestID := "", int64(-1)
	for _, n := range candidates {
		id, err := c.LastLogID(ctx, live[n], st.Topic, st.Partition)
		if err != nil {
			c.Logger.Warn("asking a candidate for its last LogID", "node", n, "err", err)
			continue
		}
		if id > bestID {
			best, bestID = n, id
		}
	}
	if best == "" {
		return
	}
	next := st
	next.Leader = best
	next.ISR = candidates
	for _, n := range st.ISR {
		if !slices.Contains(candidates, n) && !slices.Contains(next.Catchup, n) {
			next.Catchup = append(next.Catchup, n)
		}
	}
	next.EpochForWrite++
	next.WriteDisabled = false // the new leader starts taking writes
	if _, err := c.Assignments.CompareAndSwap(ctx, next); err != nil {
		c.Logger.Warn("electing a partition leader", "topic", st.Topic, "partition", st.Partition, "err", err)
		return
	}
	c.Logger.Info("partition leader elected", "topic", st.Topic, "partition", st.Partition, "leader", best, "isr", candidates, "epoch", next.EpochForWrite)
}
