package httpapi

import (
	"bufio"
	"errors"
	"net/http"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
)

// forwards takes a batch of publishes another node forwarded
// (broker.ForwardsPath): each is written as a forwarded /mpub would be,
// and its answer is streamed back as it comes, in whatever order, so one
// publish waiting for its partition holds back none of the others.
func (s *Server) forwards(w http.ResponseWriter, r *http.Request) {
	by := r.Header.Get(broker.ForwardedHeader)
	if by == "" {
		writeError(w, http.StatusBadRequest, "MISSING_FORWARDER")
		return
	}
	body, ok := readBody(w, r, s.Limits.MaxBodySize+maxForwardsOverhead)
	if !ok {
		return
	}
	fs, err := broker.DecodeForwards(body, s.Limits.MaxMsgSize)
	if err != nil {
		writeError(w, http.StatusBadRequest, "BAD_BODY")
		return
	}
	type answer struct {
		i    int
		code string
	}
	answers := make(chan answer, len(fs))
	for i, f := range fs {
		t, err := s.Broker.CreateTopic(r.Context(), f.Topic, 0)
		if err != nil {
			code := "INTERNAL_ERROR"
			if errors.Is(err, broker.ErrExiting) {
				code = "EXITING"
			}
			answers <- answer{i, code}
			continue
		}
		fwd := broker.Forwarded{By: by, Deadline: f.Deadline, SeenEpoch: f.SeenEpoch, Request: r.Context()}
		s.Broker.PublishForwarded(t, int(f.Partition), f.Bodies, fwd, func(res topic.Reply) {
			answers <- answer{i, forwardedCode(res.Err)}
		})
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	out := bufio.NewWriter(w)
	flusher, _ := w.(http.Flusher)
	var rec []byte
	for range fs {
		a := <-answers
		rec = broker.AppendForwardAnswer(rec[:0], a.i, a.code)
		out.Write(rec)
		if len(answers) == 0 {
			out.Flush()
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
	out.Flush()
}

// forwardedCode is the answer to a forwarded publish: publishCode, or
// broker.ElsewhereCode for a refusal that wrote nothing because another
// node leads, which its forwarder sends on; "" for written.
func forwardedCode(err *topic.Error) string {
	switch {
	case err == nil:
		return ""
	case err.Elsewhere:
		return broker.ElsewhereCode
	}
	return publishCode(err)
}

// maxForwardsOverhead is what a batch adds to its messages: its
// publishes' names, partitions, epochs and deadlines.
const maxForwardsOverhead = 1 << 20
