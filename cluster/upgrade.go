package cluster

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// A rolling upgrade (youzan's /cluster/upgrade/begin … /done) is a mark in
// etcd, so it holds whichever node is the controller and survives a
// change of controller:
//
//	<prefix>upgrade   the time it began, in unix nanoseconds
//
// While it is set the controller does none of the upkeep it would start of
// its own accord (upkeep): nodes restart one after another, and repairing
// or rebalancing around each would copy replicas and move leaderships for
// a node that is back a minute later. Failover goes on: a leader that
// stops is replaced at once, so writes never wait for the upgrade to end.

func upgradeKey(prefix string) string { return keyPrefix(prefix) + "upgrade" }

// Upgrade is the rolling-upgrade mark: when it began, zero for none.
type Upgrade struct{ Since time.Time }

// Active reports whether an upgrade is under way.
func (u Upgrade) Active() bool { return !u.Since.IsZero() }

// BeginUpgrade sets the mark, dated now, unless one is set already; it
// returns the mark in force, so beginning twice keeps the first date.
func (a *Assignments) BeginUpgrade(ctx context.Context, now time.Time) (Upgrade, error) {
	key := upgradeKey(a.prefix)
	resp, err := a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.FormatInt(now.UnixNano(), 10))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return Upgrade{}, fmt.Errorf("begin the upgrade: %w", err)
	}
	if resp.Succeeded {
		return Upgrade{Since: time.Unix(0, now.UnixNano())}, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // ended between the compare and the read
		return a.BeginUpgrade(ctx, now)
	}
	return parseUpgrade(kvs[0].Value)
}

// EndUpgrade clears the mark and reports whether one was set.
func (a *Assignments) EndUpgrade(ctx context.Context) (bool, error) {
	resp, err := a.cli.Delete(ctx, upgradeKey(a.prefix))
	if err != nil {
		return false, fmt.Errorf("end the upgrade: %w", err)
	}
	return resp.Deleted > 0, nil
}

// Upgrade reads the mark.
func (a *Assignments) Upgrade(ctx context.Context) (Upgrade, error) {
	resp, err := a.cli.Get(ctx, upgradeKey(a.prefix))
	if err != nil {
		return Upgrade{}, fmt.Errorf("read the upgrade mark: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return Upgrade{}, nil
	}
	return parseUpgrade(resp.Kvs[0].Value)
}

func parseUpgrade(v []byte) (Upgrade, error) {
	ns, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || ns <= 0 {
		return Upgrade{}, fmt.Errorf("upgrade mark %q: not a time", v)
	}
	return Upgrade{Since: time.Unix(0, ns)}, nil
}

// upkeep is the controller's rule for the work it starts of its own
// accord: re-creating the replicas of a node gone for RepairAfter
// (repair), and evening out leaderships and replicas (the balances). It
// does no I/O: the controller tells it what each check read and does
// what it answers.
//
// An upgrade holds all of it. When the upgrade ends, a node away during
// it gets a full RepairAfter from then: the last node of an upgrade may
// still be starting, and one really lost is repaired one RepairAfter
// later, while its partitions keep their live replicas meanwhile. The
// balances run at the first check after the end, rather than an interval
// later, to give leadership back to the restarted nodes.
type upkeep struct {
	RepairAfter time.Duration
	upgrading   bool
	gone        goneSince
	balanceNow  bool
}

func newUpkeep(repairAfter time.Duration) *upkeep {
	return &upkeep{RepairAfter: repairAfter, gone: goneSince{}}
}

// upgradeRead takes a check's reading of the upgrade mark.
func (k *upkeep) upgradeRead(u Upgrade) {
	switch {
	case u.Active() && !k.upgrading:
		k.upgrading, k.balanceNow = true, false
	case !u.Active() && k.upgrading:
		k.upgrading, k.balanceNow = false, true
		k.gone = goneSince{} // every node away gets RepairAfter from now
	}
}

// repairFrom is the nodes whose replicas a check at now re-creates
// elsewhere: gone for RepairAfter, and none while upgrading.
func (k *upkeep) repairFrom(states iter.Seq[PartitionState], live map[string]bool, now time.Time) map[string]bool {
	if k.RepairAfter <= 0 {
		return nil
	}
	if k.upgrading {
		clear(k.gone)
		return nil
	}
	return k.gone.expired(states, live, now, k.RepairAfter)
}

// mayBalance reports whether the balances may move leaderships and
// replicas now.
func (k *upkeep) mayBalance() bool { return !k.upgrading }

// balanceDue reports, once, that an upgrade has ended and the balances
// should run now.
func (k *upkeep) balanceDue() bool {
	due := k.balanceNow && !k.upgrading
	k.balanceNow = false
	return due
}
