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
	partition := -1
	if p, ok := intParam(r, "partition"); ok {
		partition = p
	}
	done := make(chan topic.Reply, 1)
	s.Broker.PublishTraced(t, partition, [][]byte{body}, []uint64{trace}, func(res topic.Reply) { done <- res })
	res := <-done
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
