package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// followAssignments keeps partition actors, and the cluster view, in step
// with their states in etcd: a changed leader or ISR becomes a RoleChanged,
// and a topic this node did not know is opened when it gets a replica here.
func (b *Broker) followAssignments(ctx context.Context) {
	if b.cfg.Assignments == nil {
		return
	}
	for states := range b.cfg.Assignments.Watch(ctx, "") {
		b.setPartitions(states)
		b.roleMu.Lock()
		for _, st := range states {
			if st.Leader == "" && st.Revision == 0 {
				continue // deleted: followTopics drops the topic
			}
			if t := b.Topic(st.Topic); t != nil {
				b.roleChanged(t, st)
			} else if hosts(st, b.cfg.NodeID) {
				b.openFromMeta(ctx, st.Topic)
			}
		}
		b.roleMu.Unlock()
	}
}

// roleChanged hands a partition's state to this node's replica, starting
// or stopping it; the caller holds roleMu. A partition beyond the topic's
// count is one an expand is adding: it starts once the topic has grown
// (topicGrew).
func (b *Broker) roleChanged(t *Topic, st cluster.PartitionState) {
	p := int(st.Partition)
	if p >= t.NumPartitions() {
		return
	}
	pid := t.Partition(p)
	switch hosted := hosts(st, b.cfg.NodeID); {
	case pid == nil && hosted:
		var err error
		if pid, err = b.gainPartition(t, st); err != nil {
			b.log.Warn("starting a partition replica placed on this node", "topic", t.Name, "partition", p, "err", err)
			return
		}
	case pid != nil && !hosted:
		b.losePartition(t, st.Partition, pid)
		return
	case pid == nil:
		return
	}
	// Publishes go to the actor once the slot says this node leads: a
	// leadership gained reaches the actor first, so none arrives before
	// its role; one lost reaches the slot first, so publishes go
	// elsewhere before the actor refuses them.
	leads := st.Leader == b.cfg.NodeID
	role := &topic.RoleChanged{Role: roleOf(st)}
	if leads {
		b.system.Root.Send(pid, role)
	}
	moved := t.slot(p).lead(leads)
	if !leads {
		b.system.Root.Send(pid, role)
	}
	if moved {
		b.leadershipMoved(t, int32(p), leads)
	}
}

// gainPartition starts a replica the cluster placed on this node while the
// topic was open here (repair moved a lost replica here, or an expand
// added the partition); it catches up from the leader, with the topic's
// channels.
func (b *Broker) gainPartition(t *Topic, st cluster.PartitionState) (*actor.PID, error) {
	chans := b.channelsOf(t)
	b.mu.Lock()
	pid := t.Partition(int(st.Partition))
	if pid == nil {
		var err error
		if pid, err = b.startPartition(t, st.Partition, roleOf(st), channelNames(chans)); err != nil {
			b.mu.Unlock()
			return nil, err
		}
		t.slot(int(st.Partition)).pid.Store(pid)
		b.resendSettings(t, pid)
	}
	b.mu.Unlock()
	b.openChannelsOn(t, st.Partition, pid, chans)
	b.log.Info("replica placed on this node", "topic", t.Name, "partition", st.Partition)
	return pid, nil
}

// losePartition stops and deletes a replica the cluster no longer places on
// this node (repair replaced it while this node was away).
func (b *Broker) losePartition(t *Topic, p int32, pid *actor.PID) {
	slot := t.slot(int(p))
	if slot.lead(false) {
		b.leadershipMoved(t, p, false)
	}
	slot.pid.Store(nil)
	slot.store.Store(nil)
	if err := b.system.Root.StopFuture(pid).Wait(); err != nil {
		// Its files stay: an actor that may still write them must not
		// write into a directory a later replica of the partition takes.
		b.log.Warn("stopping a replica moved elsewhere; its files stay", "topic", t.Name, "partition", p, "err", err)
		return
	}
	if err := b.discard(filepath.Join(b.topicDir(t.Name), fmt.Sprint(p))); err != nil {
		b.log.Warn("deleting a replica moved elsewhere", "topic", t.Name, "partition", p, "err", err)
	}
	b.log.Info("replica moved off this node", "topic", t.Name, "partition", p)
}

func (b *Broker) openFromMeta(ctx context.Context, name string) {
	m, ok, err := b.meta.Topic(ctx, name)
	if err != nil || !ok {
		return
	}
	if _, err := b.start(ctx, m); err != nil && !errors.Is(err, errPlacementIncomplete) {
		b.log.Warn("opening a topic placed on this node", "topic", name, "err", err)
	}
}
