package httpapi

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
)

// partitionMove is youzan's /topic/partition/move?topic=T&partition=P&
// move_from=A&move_to=B: it records the move and answers at once; the
// controller carries it out, and /lookup shows it until it is done. With
// move_leader=true it is a leader move (leaderMove).
func (s *Server) partitionMove(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("move_leader") == "true" {
		s.leaderMove(w, r)
		return
	}
	name, ok := topicParam(w, r)
	if !ok {
		return
	}
	p, ok := partitionParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	from, to := q.Get("move_from"), q.Get("move_to")
	if from == "" || to == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_MOVE_NODE")
		return
	}
	if _, err := s.Broker.MoveReplica(r.Context(), name, p, from, to); err != nil {
		writeMoveError(w, err)
		return
	}
	writeOK(w, nil)
}

// writeMoveError answers a refused move 400 with its reason, as youzan
// does; a move already under way 409.
func writeMoveError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, cluster.ErrMoveInProgress):
		writeError(w, http.StatusConflict, "MOVE_IN_PROGRESS")
	case errors.Is(err, cluster.ErrBadMove), errors.Is(err, cluster.ErrDrainBlocked), errors.Is(err, broker.ErrNotClustered):
		writeError(w, http.StatusBadRequest, err.Error())
	default:
		writeBrokerError(w, err)
	}
}

// replicationInfo is a partition's replicas as etcd has them, for
// /lookup?metainfo=true: an operator follows a move there.
type replicationInfo struct {
	Leader string `json:"leader"`
	// Preferred is the replica the leader balance gives leadership back
	// to; empty for partitions placed before preferred replicas existed.
	Preferred string   `json:"preferred,omitempty"`
	Epoch     int64    `json:"epoch"`
	ISR       []string `json:"isr"`
	Catchup   []string `json:"catchup"`
	Replicas  int      `json:"replicas"`
	MovingIn  []string `json:"moving_in,omitempty"`
	MovingOut []string `json:"moving_out,omitempty"`
}

func (s *Server) replication(r *http.Request, topic string) (map[string]replicationInfo, error) {
	states, err := s.Broker.PartitionStates(r.Context(), topic)
	if err != nil || len(states) == 0 {
		return nil, err
	}
	out := make(map[string]replicationInfo, len(states))
	for _, st := range states {
		out[strconv.Itoa(int(st.Partition))] = replicationInfo{
			Leader: st.Leader, Preferred: st.Preferred, Epoch: st.EpochForWrite, ISR: nonNil(st.ISR), Catchup: nonNil(st.Catchup), Replicas: int(st.Replicas),
			MovingIn: st.Move.Add, MovingOut: st.Move.Remove,
		}
	}
	return out, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nodeRemove is youzan's /cluster/node/remove?remove_node=ID: the node is
// drained, every replica moved off it, and /nodes shows it removable once
// it holds none.
func (s *Server) nodeRemove(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("remove_node")
	if id == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_REMOVE_NODE")
		return
	}
	if err := s.Broker.DrainNode(r.Context(), id); err != nil {
		writeMoveError(w, err)
		return
	}
	writeOK(w, nil)
}

// nodeLoad is Partita's part of a /nodes entry: what the node holds, and
// whether it is being drained and may be removed (a drained node holding
// no replica).
type nodeLoad struct {
	Replicas  int  `json:"replicas"`
	Leading   int  `json:"leading"`
	Draining  bool `json:"draining"`
	Removable bool `json:"removable"`
}

func loadOf(l cluster.NodeLoad, draining bool) nodeLoad {
	return nodeLoad{Replicas: l.Replicas, Leading: l.Leading, Draining: draining, Removable: draining && l.Replicas == 0}
}
