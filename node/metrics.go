package node

import (
	"context"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/metrics"
)

// newMetrics makes the node's metrics before its broker exists: the
// broker's partitions report to them from their first write.
func (n *Node) newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Options{
		Node:             n.cfg.NodeID,
		Stats:            brokerStats{n},
		Cluster:          n.clusterView,
		CatchupRateLimit: n.cfg.CatchupRateLimit,
		Load:             n.loadReading,
		WritesOff:        n.writesOff,
		ActorRunsQueued:  n.workers.Queued,
	})
}

// writesOff reads what /disable/write holds once the broker is set.
func (n *Node) writesOff() broker.WritesOff {
	if n.broker == nil {
		return broker.WritesOn
	}
	return n.broker.WritesDisabled()
}

// loadReading reads the broker's publish admission once it is set.
func (n *Node) loadReading() broker.AdmissionState {
	if n.broker == nil {
		return broker.AdmissionState{}
	}
	return n.broker.Admission()
}

// brokerStats reads the broker once it is set.
type brokerStats struct{ n *Node }

func (s brokerStats) Stats(t string) []*topic.Stats {
	if s.n.broker == nil {
		return nil
	}
	return s.n.broker.Stats(t)
}

// clusterView reads the metadata every node can see: the controller's
// election key, the registered nodes and every partition's state.
func (n *Node) clusterView(ctx context.Context) (metrics.ClusterView, error) {
	var v metrics.ClusterView
	controller, _, err := cluster.ElectedController(ctx, n.client, metaPrefix)
	if err != nil {
		return v, err
	}
	v.Controller = controller
	nodes, err := cluster.Nodes(ctx, n.client, metaPrefix)
	if err != nil {
		return v, err
	}
	live := make(map[string]bool, len(nodes))
	for _, nd := range nodes {
		live[nd.ID] = true
	}
	states, err := cluster.NewAssignments(n.client, metaPrefix).List(ctx, "")
	if err != nil {
		return v, err
	}
	v.LiveNodes, v.Partitions = len(nodes), len(states)
	for _, st := range states {
		if st.Leader == "" || !live[st.Leader] {
			v.WithoutLeader++
		}
		if len(st.ISR) < int(max(st.Replicas, 1)) {
			v.UnderReplicated++
		}
		v.CatchingUp += len(st.Catchup)
		if st.Preferred != "" && live[st.Leader] && st.Leader != st.Preferred {
			v.OffPreferred++
		}
		if st.Move.Active() {
			v.Moving++
			v.MovingIn += len(st.Move.Add)
		}
	}
	return v, nil
}
