package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/partitamq/partita/cluster"
)

// PlannedMoves is the body of a POST /partition/handover, the controller
// telling an old leader which of its leaderships are about to move, and
// of its answer, which marks those whose writes are held with none in
// flight.
type PlannedMoves struct {
	// HoldMS: how long each partition holds its writes if the move does
	// not come.
	HoldMS     int64         `json:"hold_ms"`
	Partitions []PlannedMove `json:"partitions"`
	// NotStored: the controller did not store these moves; their holds
	// end now (HoldMS is not read).
	NotStored bool `json:"not_stored,omitempty"`
}

// PlannedMove is one leadership about to move, in the epoch the
// controller saw it led in.
type PlannedMove struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Epoch     int64  `json:"epoch"`
	Drained   bool   `json:"drained,omitempty"`
}

// MaxHandOverHold bounds a hold a request may ask for: writes stop for
// as long.
const MaxHandOverHold = 5 * time.Second

// partitionsHandOver holds the writes of the leaderships the controller
// is about to move, and answers once each has none in flight, or the
// controller gave up waiting; or ends the holds of moves it did not
// store.
func (s *Server) partitionsHandOver(w http.ResponseWriter, r *http.Request) {
	var q PlannedMoves
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPartitionsLastBody)).Decode(&q); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_BODY")
		return
	}
	if q.NotStored {
		refs := make([]cluster.PartitionRef, len(q.Partitions))
		for i, p := range q.Partitions {
			refs[i] = cluster.PartitionRef{Topic: p.Topic, Partition: p.Partition}
		}
		s.Broker.MovesNotStored(refs)
		writeOK(w, q)
		return
	}
	hold := time.Duration(q.HoldMS) * time.Millisecond
	if hold <= 0 || hold > MaxHandOverHold {
		writeError(w, http.StatusBadRequest, "INVALID_HOLD")
		return
	}
	planned := make([]cluster.PlannedMove, len(q.Partitions))
	for i, p := range q.Partitions {
		planned[i] = cluster.PlannedMove{Ref: cluster.PartitionRef{Topic: p.Topic, Partition: p.Partition}, Epoch: p.Epoch}
	}
	drained := s.Broker.MovesPlanned(r.Context(), planned, hold)
	for i, p := range q.Partitions {
		q.Partitions[i].Drained = drained[cluster.PartitionRef{Topic: p.Topic, Partition: p.Partition}]
	}
	writeOK(w, q)
}
