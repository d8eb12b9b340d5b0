package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
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
	// RepairAfter is how long a replica's node may be gone before the
	// replica is re-created on another live node (0: never).
	RepairAfter time.Duration
	// ResignedWait is how long a partition whose leader resigned after a
	// restart waits for every member of its ISR to be live before the
	// controller elects among those that are: after the whole cluster
	// restarted, the member holding every acknowledged write may be the
	// last one back, and a member elected alone would make the others
	// truncate to what it kept.
	ResignedWait time.Duration

	// sessionLost: the last term ended because etcd let this node's
	// session expire, as after etcd was unreachable: every node's
	// registration may have lapsed with it, so the next term gives them a
	// TTL to register again before taking anyone for dead.
	sessionLost atomic.Bool
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
	defer c.handOver(ctx, sess)
	election := concurrency.NewElection(sess, c.Prefix+"controller")
	if err := election.Campaign(ctx, c.NodeID); err != nil {
		return err
	}
	// Campaign also returns when the keys before ours went away because
	// every lease expired, ours included: check the office is really ours.
	if leader, err := election.Leader(ctx); err != nil || string(leader.Kvs[0].Key) != election.Key() {
		c.sessionLost.Store(true)
		return fmt.Errorf("election won on a lapsed session: %v", err)
	}
	c.Logger.Info("elected controller", "node", c.NodeID)
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			c.sessionLost.Store(ctx.Err() == nil)
			cancel()
		case <-actx.Done():
		}
	}()
	graceUntil := time.Now()
	if c.sessionLost.Swap(false) {
		graceUntil = graceUntil.Add(c.TTL)
	}
	check := time.NewTicker(min(time.Second, max(c.TTL/2, 10*time.Millisecond)))
	defer check.Stop()
	nodes := WatchNodes(actx, c.Client, c.Prefix)
	var live []NodeInfo
	gone := goneSince{}
	resigned := resignedSince{}
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
		if time.Now().After(graceUntil) {
			c.failover(actx, live, resigned)
			c.repair(actx, live, gone)
		}
	}
}

// handOver ends a term by revoking its session, so the next controller is
// elected at once. The session's own Close revokes with ctx, which a
// stopping node has already cancelled: the office would then stay held
// until the lease ran out, and so would the failover of the stopping
// node's partitions.
func (c *Controller) handOver(ctx context.Context, sess *concurrency.Session) {
	sess.Orphan()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(c.TTL, time.Second))
	defer cancel()
	c.Client.Revoke(rctx, sess.Lease())
}

// failover elects a new leader for every partition whose leader is not
// live, and for every partition whose leader resigned once its whole ISR is
// live or it has waited ResignedWait.
func (c *Controller) failover(ctx context.Context, live []NodeInfo, resigned resignedSince) {
	byID := make(map[string]NodeInfo, len(live))
	for _, n := range live {
		byID[n.ID] = n
	}
	states, err := c.Assignments.List(ctx, "")
	if err != nil {
		return
	}
	waiting := map[string]bool{}
	for _, st := range states {
		if _, ok := byID[st.Leader]; ok || st.Leader == "" && len(st.ISR) == 0 {
			continue
		}
		if st.Leader == "" && !c.waitedForISR(st, byID, resigned) {
			waiting[partitionName(st.Topic, st.Partition)] = true
			continue
		}
		c.electLeader(ctx, st, byID)
	}
	for name := range resigned {
		if !waiting[name] {
			delete(resigned, name)
		}
	}
}

// resignedSince is when the controller first saw each partition without a
// leader and with ISR members not live, for this term.
type resignedSince map[string]time.Time

// waitedForISR reports whether a partition whose leader resigned may have
// its leader elected now: every ISR member is live, so the one with the
// most data is among the candidates, or ResignedWait has passed.
func (c *Controller) waitedForISR(st PartitionState, live map[string]NodeInfo, resigned resignedSince) bool {
	var missing []string
	for _, n := range st.ISR {
		if _, ok := live[n]; !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return true
	}
	name := partitionName(st.Topic, st.Partition)
	since, seen := resigned[name]
	if !seen {
		since = time.Now()
		resigned[name] = since
		c.Logger.Info("partition without a leader: waiting for its ISR before electing", "topic", st.Topic, "partition", st.Partition, "missing", missing, "for", c.ResignedWait)
	}
	return time.Since(since) >= c.ResignedWait
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

// goneSince is when the controller first saw each missing replica's node
// gone, for this term.
type goneSince map[string]time.Time

// repair re-creates replicas whose node has been gone for RepairAfter on
// the live node holding the fewest replicas and none of this partition
// (reference §3.4, Repair): the gone node leaves the partition, the new one
// enters it catching up, and the leader brings it into the ISR. The
// partition returns to its configured replica count.
func (c *Controller) repair(ctx context.Context, live []NodeInfo, gone goneSince) {
	if c.RepairAfter <= 0 {
		return
	}
	states, err := c.Assignments.List(ctx, "")
	if err != nil {
		return
	}
	byID := make(map[string]bool, len(live))
	for _, n := range live {
		byID[n.ID] = true
	}
	now := time.Now()
	missing := map[string]bool{}
	load := map[string]int{}
	for _, st := range states {
		for _, n := range slices.Concat(st.ISR, st.Catchup) {
			load[n]++
			if !byID[n] {
				missing[n] = true
				if _, ok := gone[n]; !ok {
					gone[n] = now
				}
			}
		}
	}
	for n := range gone {
		if !missing[n] {
			delete(gone, n) // back, or no longer holding anything
		}
	}
	for _, st := range states {
		if st.Leader == "" || !byID[st.Leader] {
			continue // failover first
		}
		for _, n := range slices.Concat(st.ISR, st.Catchup) {
			if byID[n] || now.Sub(gone[n]) < c.RepairAfter {
				continue
			}
			to := leastLoaded(live, load, st)
			if to == "" {
				break // no node to put it on
			}
			next := st
			next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(x string) bool { return x == n })
			next.Catchup = append(slices.DeleteFunc(slices.Clone(st.Catchup), func(x string) bool { return x == n }), to)
			stored, err := c.Assignments.CompareAndSwap(ctx, next)
			if err != nil {
				c.Logger.Warn("repairing a replica", "topic", st.Topic, "partition", st.Partition, "gone", n, "err", err)
				break
			}
			load[to]++
			c.Logger.Info("replica re-created on another node", "topic", st.Topic, "partition", st.Partition, "gone", n, "to", to, "gone_for", now.Sub(gone[n]).Round(time.Second))
			st = stored
		}
	}
}

// leastLoaded is the live node holding the fewest replicas and none of st.
func leastLoaded(live []NodeInfo, load map[string]int, st PartitionState) string {
	best := ""
	for _, n := range live {
		if n.ID == st.Leader || slices.Contains(st.ISR, n.ID) || slices.Contains(st.Catchup, n.ID) {
			continue
		}
		if best == "" || load[n.ID] < load[best] || load[n.ID] == load[best] && n.ID < best {
			best = n.ID
		}
	}
	return best
}
