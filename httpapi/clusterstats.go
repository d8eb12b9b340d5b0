package httpapi

import (
	"net/http"

	"github.com/partitamq/partita/cluster"
)

// clusterStats answers youzan's nsqlookupd /cluster/stats on every node,
// from etcd: youzan's fields where they map (stable, node_stat_list,
// topn_topics), then Partita's counts of what the partitions lack. youzan
// weighs its load factors by traffic; here they are the counts of
// leaderships and replicas each node holds, which is what the leader
// balance and the replica balance even out.
func (s *Server) clusterStats(w http.ResponseWriter, r *http.Request) {
	if v := r.URL.Query().Get("topn"); v != "" {
		if _, ok := intParam(r, "topn"); !ok {
			writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPN")
			return
		}
	}
	st, err := s.Broker.ClusterStats(r.Context())
	if err != nil {
		writeBrokerError(w, err)
		return
	}
	type nodeStat struct {
		ID string `json:"id"`
		peerInfo
		LeaderLoadFactor float64 `json:"leader_load_factor"`
		NodeLoadFactor   float64 `json:"node_load_factor"`
		Zone             string  `json:"zone"`
		nodeLoad
	}
	nodes := make([]nodeStat, 0, len(st.Nodes))
	for _, n := range st.Nodes {
		peer := s.peerOf(n.Node)
		if n.Node.ID == s.Broker.NodeID() {
			peer = s.peer()
		}
		nodes = append(nodes, nodeStat{ID: n.Node.ID, peerInfo: peer, LeaderLoadFactor: float64(n.Leading), NodeLoadFactor: float64(n.Replicas),
			Zone: n.Node.Zone, nodeLoad: loadOf(n.NodeLoad, n.Draining)})
	}
	gone := st.Gone
	if gone == nil {
		gone = []string{}
	}
	writeOK(w, struct {
		Stable                    bool       `json:"stable"`
		NodeStatList              []nodeStat `json:"node_stat_list"`
		TopNTopics                []struct{} `json:"topn_topics"`
		Upgrading                 bool       `json:"upgrading"`
		UpgradeSince              int64      `json:"upgrade_since,omitempty"`
		Controller                string     `json:"controller"`
		LiveNodes                 int        `json:"live_nodes"`
		GoneNodes                 []string   `json:"gone_nodes"`
		Partitions                int        `json:"partitions"`
		LeaderlessPartitions      int        `json:"leaderless_partitions"`
		UnderReplicatedPartitions int        `json:"under_replicated_partitions"`
		WriteDisabledPartitions   int        `json:"write_disabled_partitions"`
		MovingPartitions          int        `json:"moving_partitions"`
	}{
		Stable: st.Stable, NodeStatList: nodes, Upgrading: st.Upgrade.Active(), UpgradeSince: upgradeSince(st.Upgrade), TopNTopics: []struct{}{}, Controller: st.Controller,
		LiveNodes: len(st.Nodes), GoneNodes: gone, Partitions: st.Partitions, LeaderlessPartitions: st.Leaderless,
		UnderReplicatedPartitions: st.UnderReplicated, WriteDisabledPartitions: st.WriteDisabled, MovingPartitions: st.Moving,
	})
}

func upgradeSince(u cluster.Upgrade) int64 {
	if !u.Active() {
		return 0
	}
	return u.Since.Unix()
}

// upgradeBegin is youzan's nsqlookupd /cluster/upgrade/begin, on any node:
// it sets the rolling-upgrade mark in etcd, which holds the controller's
// replica repair and both balances until /cluster/upgrade/done; failover
// goes on. Beginning twice keeps the first date. It answers the mark.
func (s *Server) upgradeBegin(w http.ResponseWriter, r *http.Request) {
	u, err := s.Broker.BeginUpgrade(r.Context())
	if err != nil {
		writeMoveError(w, err)
		return
	}
	writeOK(w, map[string]any{"upgrading": true, "upgrade_since": u.Since.Unix()})
}

// upgradeDone is youzan's nsqlookupd /cluster/upgrade/done: it clears the
// mark, and the controller repairs and balances again from its next check.
func (s *Server) upgradeDone(w http.ResponseWriter, r *http.Request) {
	if err := s.Broker.EndUpgrade(r.Context()); err != nil {
		writeMoveError(w, err)
		return
	}
	writeOK(w, map[string]any{"upgrading": false})
}
