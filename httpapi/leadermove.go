package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/partitamq/partita/cluster"
)

// leaderMoveWait bounds the wait for the controller's decision, well
// within requestTimeout so the answer says what became of the request.
const leaderMoveWait = 5 * time.Second

// LeaderMoved is the answer to a leader move: the partition's leader and
// write epoch once the controller moved it.
type LeaderMoved struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Leader    string `json:"leader"`
	Epoch     int64  `json:"epoch"`
}

// leaderMove is youzan's /topic/partition/move in its move_leader=true
// form: topic, partition, and optionally move_from (must be the leader)
// and move_to (an ISR member). It asks the controller, through etcd, to
// hand the partition's leadership over, and answers once it decided
// (docs/replication.md#leader-move).
func (s *Server) leaderMove(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("move_leader") != "true" {
		writeError(w, http.StatusBadRequest, "MOVE_LEADER_ONLY")
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
	ctx, cancel := context.WithTimeout(r.Context(), leaderMoveWait)
	defer cancel()
	st, err := s.Broker.MoveLeader(ctx, name, p, q.Get("move_from"), q.Get("move_to"))
	if err != nil {
		status, code := leaderMoveError(err)
		writeError(w, status, code)
		return
	}
	writeOK(w, LeaderMoved{Topic: st.Topic, Partition: st.Partition, Leader: st.Leader, Epoch: st.EpochForWrite})
}

func leaderMoveError(err error) (int, string) {
	for _, e := range []struct {
		err    error
		status int
		code   string
	}{
		{cluster.ErrPartitionNotFound, http.StatusNotFound, "PARTITION_NOT_FOUND"},
		{cluster.ErrFromNotLeader, http.StatusBadRequest, "MOVE_FROM_NOT_LEADER"},
		{cluster.ErrTargetNotInISR, http.StatusBadRequest, "MOVE_TO_NOT_IN_ISR"},
		{cluster.ErrTargetNotLive, http.StatusBadRequest, "MOVE_TO_NOT_LIVE"},
		{cluster.ErrAlreadyLeader, http.StatusBadRequest, "MOVE_TO_IS_LEADER"},
		{cluster.ErrNoTarget, http.StatusBadRequest, "NO_OTHER_ISR_MEMBER"},
		{cluster.ErrNoLiveLeader, http.StatusServiceUnavailable, "NO_LIVE_LEADER"},
		{cluster.ErrMoveRefused, http.StatusConflict, "LEADER_MOVE_REFUSED"},
		{cluster.ErrLeaderMoved, http.StatusConflict, "LEADER_MOVED_ELSEWHERE"},
		{context.DeadlineExceeded, http.StatusGatewayTimeout, "LEADER_MOVE_TIMEOUT"},
	} {
		if errors.Is(err, e.err) {
			return e.status, e.code
		}
	}
	return http.StatusInternalServerError, "INTERNAL_ERROR"
}
