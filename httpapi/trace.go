package httpapi

import (
	"net/http"
	"strconv"

	"github.com/partitamq/partita/actors/topic"
)

// pubTrace is youzan's /pubtrace?topic=T[&partition=P]&trace_id=N: a /pub
// whose trace ID is stored with the message, answered with where the
// message went, as PUB_TRACE answers over TCP. It is never forwarded: the
// partition must be led here.
func (s *Server) pubTrace(w http.ResponseWriter, r *http.Request) {
	trace, err := strconv.ParseUint(r.URL.Query().Get("trace_id"), 10, 64)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_TRACE_ID")
		return
	}
	body, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	t, ok := s.createTopic(w, r)
	if !ok {
		return
	}
	done := make(chan topic.Reply, 1)
	s.Broker.PublishTraced(t, partitionArg(r), [][]byte{body}, []uint64{trace}, func(res topic.Reply) { done <- res })
	writeTraced(w, <-done, trace)
}

// partitionArg is ?partition=, -1 (any) when absent.
func partitionArg(r *http.Request) int {
	if p, ok := intParam(r, "partition"); ok {
		return p
	}
	return -1
}

// writeTraced answers a traced publish with where the message went.
func writeTraced(w http.ResponseWriter, res topic.Reply, trace uint64) {
	if res.Err != nil {
		writeError(w, publishStatus(res.Err), publishCode(res.Err))
		return
	}
	writeOK(w, map[string]any{
		"status":       "OK",
		"id":           idHex(res.MsgID),
		"trace_id":     strconv.FormatUint(trace, 10),
		"queue_offset": res.Offset,
		"rawsize":      res.Size,
	})
}
