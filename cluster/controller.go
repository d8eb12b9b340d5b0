package cluster

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Controller is the one node, elected through etcd, that moves partition
// leadership off nodes whose registration lapsed: for a partition whose
// leader is gone it picks the live ISR member with the largest last LogID,
// drops the dead members from the ISR and bumps EpochForWrite, by
// compare-and-swap. A lost node may have led thousands of partitions, so
// they are elected together: one question to each candidate node, and
// transactions of many partitions. It is also the one that hands a live
// leader's partitions over, when asked or to their preferred replicas
// (leadermoves.go). Every node runs one; only the elected one acts.
type Controller struct {
	Client      *clientv3.Client
	Prefix      string
	NodeID      string
	Assignments *Assignments
	// LastLogIDs asks a node for its last committed LogID of each
	// partition given. A partition it does not hold, or could not answer
	// for in time, is absent from the answer.
	LastLogIDs func(ctx context.Context, node NodeInfo, partitions []PartitionRef) (map[PartitionRef]int64, error)
	TTL        time.Duration // of the election session
	Logger     *slog.Logger
	// Observe, if set, is told what each round of elections did.
	Observe func(FailoverRound)
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
	// LeaderBalanceInterval is how often leadership goes back to the
	// preferred replicas (0: never), at most LeaderBalanceMoves
	// partitions a round.
	LeaderBalanceInterval time.Duration
	LeaderBalanceMoves    int
	// ObserveLeaderMoves, if set, is told how many leaderships a round
	// moved, and why (MoveAsked, MoveBalance, MoveDrain).
	ObserveLeaderMoves func(reason string, moved int)
	// HandOver, if set, tells node that the leaderships of planned are
	// about to move, and returns how many of them hold their writes with
	// none in flight, once each answered or ctx ended (handover.go);
	// HandOverWait bounds the wait (0: DefaultHandOverWait).
	// ObserveHandOvers, if set, is told what became of each round's
	// leaderships asked to drain.
	HandOver         func(ctx context.Context, node NodeInfo, planned []PlannedMove) (drained int, err error)
	HandOverWait     time.Duration
	ObserveHandOvers func(HandOverRound)
	// MovesNotStored, if set, tells node that the moves of planned it
	// was asked to drain for were not stored, so it writes again at once.
	MovesNotStored func(ctx context.Context, node NodeInfo, planned []PlannedMove) error
	// MaxMoves bounds the replica moves under way at once that drains and
	// the balance start (0: DefaultMaxMoves); BalanceInterval is how often
	// the balance looks for nodes holding too many replicas (0: never).
	MaxMoves        int
	BalanceInterval time.Duration
	// Heard reports whether this node's replication session to a node is
	// up: the node answered within the session's down-after. A leader
	// whose registration lapsed but that is heard keeps its partitions
	// for up to LapseGrace (0: not at all), so a live node that renewed
	// its lease too late is not failed over while it registers again
	// (lapses.go).
	Heard      func(node string) bool
	LapseGrace time.Duration

	// sessionLost: the last term ended because etcd let this node's
	// session expire, as after etcd was unreachable: every node's
	// registration may have lapsed with it, so the next term gives them a
	// TTL to register again before taking anyone for dead.
	sessionLost atomic.Bool
	// feed relays the live nodes to a term's loop, and marks their losses
	// for the rounds of moves it runs (losses.go); nil between terms. Only
	// the loop reads it.
	feed *nodeFeed
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
	election := concurrency.NewElection(sess, electionPrefix(c.Prefix))
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
	nodes := newNodeFeed()
	c.feed = nodes
	defer func() { c.feed = nil }()
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
	checkEvery := min(time.Second, max(c.TTL/2, 10*time.Millisecond))
	check := time.NewTicker(checkEvery)
	defer check.Stop()
	go nodes.relay(WatchNodes(actx, c.Client, c.Prefix))
	changes := c.Assignments.Watch(actx, "")
	view := partitionView{}
	// Seeded before the first check, which would otherwise see only what
	// the watch has delivered so far and elect the lost partitions in
	// pieces.
	if states, err := c.Assignments.List(actx, ""); err == nil {
		for _, st := range states {
			view.apply(st)
		}
	}
	var live []NodeInfo
	keep := newUpkeep(c.RepairAfter)
	resigned := resignedSince{}
	lapsed := newLapses(c.LapseGrace)
	asks := c.Assignments.WatchLeaderMoves(actx)
	queue := newAskQueue()
	balance := newOptionalTicker(c.LeaderBalanceInterval)
	defer balance.Stop()
	// Moves wait for the first list of live nodes: without it every target
	// looks gone.
	ready := func() bool { return live != nil && time.Now().After(graceUntil) }
	balancedAt := time.Now() // a new term balances after one interval
	turn := placementTurn{every: checkEvery}
	for {
		select {
		case <-actx.Done():
			return nil
		case <-nodes.ready:
			ns, ok := nodes.take()
			if !ok {
				return nil
			}
			live = ns
		case states, ok := <-changes:
			if !ok {
				return nil
			}
			for _, st := range states {
				view.apply(st)
			}
			continue
		case ps, ok := <-asks:
			if !ok {
				return nil
			}
			if queue.seen(ps); ready() {
				c.carryOutAsks(actx, view, live, queue)
			}
			continue
		case <-balance.C:
			if ready() && c.upgradeRead(actx, keep) && keep.mayBalance() {
				// Leadership goes back to no node being drained.
				draining, err := c.Assignments.Draining(actx)
				if err == nil {
					c.balanceLeaders(actx, view, live, withLeaving(draining, live))
				}
			}
			continue
		case <-check.C:
		}
		if time.Now().After(graceUntil) {
			if turn.after(c.failover(actx, view, live, resigned, lapsed), time.Now()) {
				c.placements(actx, view, live, keep, &balancedAt)
			}
		}
		if ready() {
			c.carryOutAsks(actx, view, live, queue)
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

// placementTurn decides whether a check's repairs and moves run after its
// failover. A check that elected leaders puts them off for a check
// interval: a node lost with thousands of leaderships has them elected on
// a machine that is busy taking them over, and scanning every partition
// for repairs and moves beside that only delays the new leaders. A node
// list that changes meanwhile runs a check too, and waits as well. They
// never wait past two intervals since they last ran, so elections every
// second cannot starve them.
type placementTurn struct {
	every time.Duration
	until time.Time // put off until then by the last check that elected
	last  time.Time // when they last ran
}

// after takes the number of leaders a check at now elected and reports
// whether its placements run.
func (t *placementTurn) after(elected int, now time.Time) bool {
	if elected > 0 {
		t.until = now.Add(t.every)
	}
	if now.Before(t.until) && now.Sub(t.last) < 2*t.every {
		return false
	}
	t.last = now
	return true
}

// failover elects a new leader for every partition whose leader is not
// live, and for every partition whose leader resigned once its whole ISR is
// live or it has waited ResignedWait. A partition changed concurrently while
// it was being elected is read and elected again at once, a bounded number
// of times; the next check takes over from there. It returns how many
// leaders it elected.
//
// What it stores, and what a conflict shows is stored now, goes into view
// at once: the watch brings the same later, but a check that ran before it
// has, as after thousands of elections, would elect them all again and fail
// every compare.
func (c *Controller) failover(ctx context.Context, view partitionView, live []NodeInfo, resigned resignedSince, lapsed *lapses) (elected int) {
	byID := make(map[string]NodeInfo, len(live))
	for _, n := range live {
		byID[n.ID] = n
	}
	// Scanned in place: a check runs every second and at every change of
	// the node list, and copying 10,000 states each time was most of the
	// controller's CPU in a mass failover.
	states := view.all()
	spared, newly := lapsed.spare(states, liveSet(byID), c.heard, time.Now())
	for _, s := range newly {
		c.Logger.Warn("node's registration lapsed, but its replication session answers: its partitions keep their leader while it registers again",
			"node", s.Node, "until", s.Until.Format(time.RFC3339Nano))
	}
	for round := range maxElectionRounds {
		if round > 0 {
			// Another writer changed some: read what is stored now rather
			// than wait for the watch to bring it.
			listed, err := c.Assignments.List(ctx, "")
			if err != nil {
				return elected
			}
			states = slices.Values(listed)
		}
		lost := c.leaderless(states, byID, resigned, spared)
		if len(lost) == 0 {
			return elected
		}
		round := c.elect(ctx, lost, byID, view)
		elected += round.Elected
		if round.Conflicts == 0 {
			return elected
		}
	}
	return elected
}

// heard reports whether the controller has proof that node runs: it is
// this node, or this node's replication session to it is up.
func (c *Controller) heard(node string) bool {
	return node == c.NodeID || c.Heard != nil && c.Heard(node)
}

// partitionView is the controller's copy of every partition's state, kept
// by a watch, so the check every second scans memory instead of listing
// thousands of partitions from etcd, which cost the node running etcd
// several percent of a core with nothing happening.
type partitionView map[PartitionRef]PartitionState

// apply takes a state from the watch or a list, keeping the newer of two;
// a deleted partition comes without a revision.
func (v partitionView) apply(st PartitionState) {
	if st.Revision == 0 {
		delete(v, st.Ref())
		return
	}
	if st.Revision >= v[st.Ref()].Revision {
		v[st.Ref()] = st
	}
}

// stored takes what a swap stored, or on a conflict what it found stored.
func (v partitionView) stored(res SwapResult) {
	if res.Stored.Revision != 0 {
		v.apply(res.Stored)
	}
}

// leads counts the partitions each node leads.
func (v partitionView) leads() map[string]int {
	out := map[string]int{}
	for _, st := range v {
		if st.Leader != "" {
			out[st.Leader]++
		}
	}
	return out
}

// all is every state in the view, for a scan that keeps none of them.
func (v partitionView) all() iter.Seq[PartitionState] { return maps.Values(v) }

// states lists the view in no order: sorting ten thousand states every
// second was most of an idle controller's work.
func (v partitionView) states() []PartitionState {
	out := make([]PartitionState, 0, len(v))
	for _, st := range v {
		out = append(out, st)
	}
	return out
}

// maxElectionRounds bounds failover's re-reads after concurrent changes:
// each is another writer's success, so only a storm of them runs out.
const maxElectionRounds = 3

// leaderless is the partitions of states that need a leader and may have
// one elected now; a leader spared (lapses) keeps its partitions. It
// forgets the partitions resigned no longer waits for.
func (c *Controller) leaderless(states iter.Seq[PartitionState], live map[string]NodeInfo, resigned resignedSince, spared map[string]bool) []PartitionState {
	isLive := liveSet(live)
	for n := range spared {
		isLive[n] = true
	}
	var lost []PartitionState
	waiting := map[string]bool{}
	for st := range states {
		if !needsLeader(st, isLive) {
			continue
		}
		if st.Leader == "" && !c.waitedForISR(st, live, resigned) {
			waiting[partitionName(st.Topic, st.Partition)] = true
			continue
		}
		lost = append(lost, st)
	}
	for name := range resigned {
		if !waiting[name] {
			delete(resigned, name)
		}
	}
	return lost
}

func liveSet(live map[string]NodeInfo) map[string]bool {
	set := make(map[string]bool, len(live))
	for id := range live {
		set[id] = true
	}
	return set
}

func nodeIDs(live []NodeInfo) map[string]bool {
	set := make(map[string]bool, len(live))
	for _, n := range live {
		set[n.ID] = true
	}
	return set
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

// elect gives every partition of lost a leader: it asks the candidates for
// their last LogIDs, decides, and stores the new states in few
// transactions. Its round says how many were elected, and how many changed
// concurrently and were left as they are.
func (c *Controller) elect(ctx context.Context, lost []PartitionState, live map[string]NodeInfo, view partitionView) FailoverRound {
	start := time.Now()
	logs := c.askCandidates(ctx, lost, live)
	asked := time.Since(start)
	elected, failed := electLeaders(lost, electorateOf(live, view.leads()), logs)
	c.logUnelected(failed)
	storing := time.Now()
	round := c.storeElected(ctx, elected, view)
	stored := time.Since(storing)
	round.Lost, round.Unelected = len(lost), round.Unelected+len(failed)
	round.Took = time.Since(start)
	level := slog.LevelInfo
	if round.Elected+round.Conflicts == 0 {
		level = slog.LevelDebug // the same partitions fail every check
	}
	c.Logger.Log(ctx, level, "failover round", "lost", round.Lost, "elected", round.Elected, "unelected", round.Unelected,
		"conflicts", round.Conflicts, "candidates", len(logs), "asked_in", asked.Round(time.Millisecond), "stored_in", stored.Round(time.Millisecond), "took", round.Took.Round(time.Millisecond))
	if c.Observe != nil {
		c.Observe(round)
	}
	return round
}

// maxUnelectedLogged bounds the partitions a round names one by one when
// it could not elect them: a lost node's thousands would otherwise write
// thousands of lines every check.
const maxUnelectedLogged = 10

// logUnelected reports the partitions a round left without a leader.
func (c *Controller) logUnelected(failed []unelected) {
	for _, u := range failed[:min(len(failed), maxUnelectedLogged)] {
		c.Logger.Error("partition left without a leader", "topic", u.State.Topic, "partition", u.State.Partition, "isr", u.State.ISR, "err", u.Err)
	}
	if len(failed) > maxUnelectedLogged {
		c.Logger.Error("partitions left without a leader, beyond those named", "more", len(failed)-maxUnelectedLogged, "in_all", len(failed))
	}
}

// maxElectedLogged bounds the elections a round logs one by one at info
// level: a lost node's thousands wrote thousands of lines on the
// controller's node in the second its survivors took the leaderships
// over. A larger round logs each at debug level and, at info, how many
// each new leader took.
const maxElectedLogged = 10

// storeElected stores the elected states together and logs each outcome.
func (c *Controller) storeElected(ctx context.Context, elected []PartitionState, view partitionView) (round FailoverRound) {
	level, byLeader := slog.LevelInfo, map[string]int{}
	if len(elected) > maxElectedLogged {
		level = slog.LevelDebug
	}
	defer func() {
		if level == slog.LevelDebug && round.Elected > 0 {
			c.Logger.Info("partition leaders elected", "elected", round.Elected, "by_leader", byLeader)
		}
	}()
	for i, res := range c.Assignments.CompareAndSwapAll(ctx, elected) {
		next := elected[i]
		view.stored(res)
		switch {
		case res.Err == nil:
			round.Elected++
			byLeader[next.Leader]++
			c.Logger.Log(ctx, level, "partition leader elected", "topic", next.Topic, "partition", next.Partition, "leader", next.Leader, "isr", next.ISR, "epoch", next.EpochForWrite)
			continue
		case errors.Is(res.Err, ErrConflict):
			round.Conflicts++
		default:
			round.Unelected++
		}
		if ctx.Err() == nil { // else the term ended, and the next controller takes over
			c.Logger.Warn("electing a partition leader", "topic", next.Topic, "partition", next.Partition, "err", res.Err)
		}
	}
	return round
}

// FailoverRound is what one round of elections did, for metrics.
type FailoverRound struct {
	Lost      int // partitions that needed a leader
	Elected   int
	Unelected int // no candidate, no answer, or the store failed
	Conflicts int // changed concurrently; elected again from what is stored
	Took      time.Duration
}

// askTimeout bounds the wait for the candidates' last LogIDs; a node that
// does not answer in time is no candidate this round. It exceeds the time a
// node gives its partitions to answer.
const askTimeout = 3 * time.Second

// askCandidates asks every live node holding an ISR seat of a lost
// partition for its last LogIDs of all those partitions, in one call per
// node, every node at once: the time to elect hundreds of partitions is
// that of the slowest node's one answer.
func (c *Controller) askCandidates(ctx context.Context, lost []PartitionState, live map[string]NodeInfo) lastLogIDs {
	held := map[string][]PartitionRef{}
	for _, st := range lost {
		for _, n := range st.ISR {
			if _, ok := live[n]; ok {
				held[n] = append(held[n], st.Ref())
			}
		}
	}
	actx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	logs := make(lastLogIDs, len(held))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for n, parts := range held {
		wg.Go(func() {
			ids, err := c.LastLogIDs(actx, live[n], parts)
			if err != nil {
				c.Logger.Warn("asking a candidate for its last LogIDs", "node", n, "partitions", len(parts), "err", err)
				return
			}
			mu.Lock()
			logs[n] = ids
			mu.Unlock()
		})
	}
	wg.Wait()
	return logs
}

// goneSince is when the controller first saw each missing replica's node
// gone, for this term.
type goneSince map[string]time.Time

// expired records when each node holding a replica of states was first seen
// gone, forgets those back or holding nothing, and returns the ones gone
// for at least after.
func (g goneSince) expired(states iter.Seq[PartitionState], live map[string]bool, now time.Time, after time.Duration) map[string]bool {
	missing := map[string]bool{}
	note := func(nodes []string) {
		for _, n := range nodes {
			if live[n] {
				continue
			}
			missing[n] = true
			if _, ok := g[n]; !ok {
				g[n] = now
			}
		}
	}
	for st := range states {
		note(st.ISR)
		note(st.Catchup)
	}
	expired := map[string]bool{}
	for n, since := range g {
		switch {
		case !missing[n]:
			delete(g, n)
		case now.Sub(since) >= after:
			expired[n] = true
		}
	}
	return expired
}

// upgradeRead hands keep the upgrade mark and reports whether it was read:
// on a failure to read, the upkeep waits for the next check.
func (c *Controller) upgradeRead(ctx context.Context, keep *upkeep) bool {
	u, err := c.Assignments.Upgrade(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.Logger.Warn("reading the upgrade mark", "err", err)
		}
		return false
	}
	if u.Active() != keep.upgrading {
		if u.Active() {
			c.Logger.Info("upgrade begun: repair and the balances held", "since", u.Since)
		} else {
			c.Logger.Info("upgrade done: repair and the balances resume")
		}
	}
	keep.upgradeRead(u)
	return true
}

// repair re-creates replicas whose node has been gone for RepairAfter on
// the live nodes, not drained, holding the fewest replicas and none of
// their partition, in the zone the partition lacks most:
// the gone node leaves the partition, the new one enters it catching up,
// and the leader brings it into the ISR, returning the partition to its
// configured replica count. A node lost for good may have held thousands of
// replicas, so every move is stored together, in few transactions.
func (c *Controller) repair(ctx context.Context, view partitionView, live []NodeInfo, draining map[string]bool, keep *upkeep) {
	if c.RepairAfter <= 0 {
		return
	}
	now := time.Now()
	from := keep.repairFrom(view.all(), nodeIDs(live), now)
	if len(from) == 0 {
		return
	}
	plans := planRepairs(view.states(), live, draining, from)
	next := make([]PartitionState, len(plans))
	for i, p := range plans {
		next[i] = p.Next
	}
	for i, res := range c.Assignments.CompareAndSwapAll(ctx, next) {
		view.stored(res)
		st := plans[i].Next
		for _, m := range plans[i].Moves {
			if res.Err != nil {
				c.Logger.Warn("repairing a replica", "topic", st.Topic, "partition", st.Partition, "gone", m.Gone, "err", res.Err)
				continue
			}
			c.Logger.Info("replica re-created on another node", "topic", st.Topic, "partition", st.Partition, "gone", m.Gone, "to", m.To, "gone_for", now.Sub(keep.gone[m.Gone]).Round(time.Second))
		}
	}
}

// repairPlan is a partition's next state with the replicas it moves.
type repairPlan struct {
	Next  PartitionState
	Moves []replicaMove
}

type replicaMove struct{ Gone, To string }

// planRepairs moves every replica on an expired node of a partition whose
// leader is live to a live node not being drained (spreadTarget: in the
// zone the partition lacks most, then holding the fewest replicas),
// counting the moves already planned; a moved preferred replica's
// replacement becomes preferred. A partition without a live leader is left
// to failover first. It does no I/O.
func planRepairs(states []PartitionState, live []NodeInfo, draining, expired map[string]bool) []repairPlan {
	load := replicaLoad(states)
	isLive := nodeIDs(live)
	targets := placeable(live, draining)
	var plans []repairPlan
	for _, st := range states {
		if !isLive[st.Leader] {
			continue
		}
		plan := repairPlan{Next: st}
		for _, n := range slices.Concat(st.ISR, st.Catchup) {
			if !expired[n] {
				continue
			}
			to := spreadTarget(plan.Next, n, targets, load)
			if to == "" {
				break // no node to put it on
			}
			next := &plan.Next
			next.ISR = slices.DeleteFunc(slices.Clone(next.ISR), func(x string) bool { return x == n })
			next.Catchup = append(slices.DeleteFunc(slices.Clone(next.Catchup), func(x string) bool { return x == n }), to)
			if next.Preferred == n {
				next.Preferred = to // the replacement takes over its share of leaderships
			}
			if slices.Contains(next.Move.Add, n) {
				// A move waiting for its gone target goes on with the
				// replacement.
				next.Move.Add = append(without(next.Move.Add, n), to)
			}
			load[to]++
			plan.Moves = append(plan.Moves, replicaMove{Gone: n, To: to})
		}
		if len(plan.Moves) > 0 {
			plans = append(plans, plan)
		}
	}
	return plans
}
