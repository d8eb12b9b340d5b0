package httpapi

import (
	"errors"
	"net/http"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
)

// topicExpand answers youzan's /topic/partition/expand?topic=T&partition_num=N:
// the topic grows to N partitions cluster-wide, whichever node is asked.
// A count that would shrink the topic or leave it as it is is refused
// with youzan's message or its like.
func (s *Server) topicExpand(w http.ResponseWriter, r *http.Request) {
	name, ok := topicParam(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("partition_num") == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC_PARTITION_NUM")
		return
	}
	n, ok := intParam(r, "partition_num")
	if !ok || n < 1 || n > topic.MaxPartitions {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPIC_PARTITION_NUM")
		return
	}
	_, err := s.Broker.ExpandTopic(r.Context(), name, n)
	switch {
	case err == nil:
		writeOK(w, nil)
	case errors.Is(err, cluster.ErrTopicNotFound):
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
	case errors.Is(err, cluster.ErrPartitionsReduced):
		writeError(w, http.StatusBadRequest, cluster.ErrPartitionsReduced.Error())
	case errors.Is(err, cluster.ErrPartitionsUnchanged):
		writeError(w, http.StatusBadRequest, cluster.ErrPartitionsUnchanged.Error())
	case errors.Is(err, broker.ErrNotEnoughNodes):
		writeError(w, http.StatusBadRequest, "NOT_ENOUGH_NODES")
	case errors.Is(err, broker.ErrCannotExpand):
		writeError(w, http.StatusBadRequest, "CANNOT_EXPAND")
	default:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	}
}
