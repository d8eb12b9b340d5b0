package httpapi

import (
	"net/http"
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
		Controller                string     `json:"controller"`
		LiveNodes                 int        `json:"live_nodes"`
		GoneNodes                 []string   `json:"gone_nodes"`
		Partitions                int        `json:"partitions"`
		LeaderlessPartitions      int        `json:"leaderless_partitions"`
		UnderReplicatedPartitions int        `json:"under_replicated_partitions"`
		WriteDisabledPartitions   int        `json:"write_disabled_partitions"`
		MovingPartitions          int        `json:"moving_partitions"`
	}{
		Stable: st.Stable, NodeStatList: nodes, TopNTopics: []struct{}{}, Controller: st.Controller,
		LiveNodes: len(st.Nodes), GoneNodes: gone, Partitions: st.Partitions, LeaderlessPartitions: st.Leaderless,
		UnderReplicatedPartitions: st.UnderReplicated, WriteDisabledPartitions: st.WriteDisabled, MovingPartitions: st.Moving,
	})
}
