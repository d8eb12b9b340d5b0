package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// leaveISRAfterRestart applies the restart rules of
// docs/replication.md#restarts to a topic's partitions. A follower that was
// in the ISR when it stopped may have lost writes it acknowledged (fsync is
// every --sync-every commits), so it leaves the ISR and rejoins through
// catch-up, unless the ISR would lose its majority; a leader with followers
// resigns, leaving the ISR on the same terms, so the controller elects the
// member with the most data (it may be this one); a copy of a partition
// placed elsewhere meanwhile goes.
func (b *Broker) leaveISRAfterRestart(ctx context.Context, name string) {
	if b.cfg.Assignments == nil || topic.IsEphemeral(name) {
		return
	}
	states, err := b.cfg.Assignments.List(ctx, name)
	if err != nil {
		return
	}
	for _, st := range states {
		if !hosts(st, b.cfg.NodeID) {
			b.dropStaleReplica(st)
			continue
		}
		if st.Leader == b.cfg.NodeID {
			if len(st.ISR) > 1 {
				if _, err := b.cfg.Assignments.ResignLeadership(ctx, name, st.Partition, b.cfg.NodeID); err != nil {
					b.log.Warn("resigning leadership after a restart", "topic", name, "partition", st.Partition, "err", err)
				} else {
					b.log.Info("resigned leadership after a restart: the ISR member with the most data leads", "topic", name, "partition", st.Partition)
				}
			}
			continue
		}
		if !slices.Contains(st.ISR, b.cfg.NodeID) {
			continue
		}
		_, err := b.cfg.Assignments.LeaveISR(ctx, name, st.Partition, b.cfg.NodeID)
		switch {
		case err == nil:
			b.log.Info("left the ISR after a restart, to rejoin by catch-up", "topic", name, "partition", st.Partition)
		case errors.Is(err, cluster.ErrISRTooSmall):
			b.log.Info("staying in the ISR after a restart: it would lose its majority", "topic", name, "partition", st.Partition)
		default:
			b.log.Warn("leaving the ISR after a restart", "topic", name, "partition", st.Partition, "err", err)
		}
	}
}

// dropStaleReplica deletes this node's copy of a partition the cluster
// placed elsewhere while the node was away (repair), once the partition has
// all its in-sync replicas without it
// (docs/replication.md#restart-stale-replica-dropped).
func (b *Broker) dropStaleReplica(st cluster.PartitionState) {
	dir := filepath.Join(b.topicDir(st.Topic), fmt.Sprint(st.Partition))
	if _, err := os.Stat(dir); err != nil || len(st.ISR) < int(st.Replicas) {
		return
	}
	if err := b.discard(dir); err != nil {
		b.log.Warn("deleting a replica placed elsewhere", "topic", st.Topic, "partition", st.Partition, "err", err)
		return
	}
	b.log.Info("deleted a replica placed elsewhere while this node was away", "topic", st.Topic, "partition", st.Partition)
}
