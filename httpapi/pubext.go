package httpapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/protocol"
)

// extHeaderPrefix names the HTTP headers /pub_ext adds to a message's JSON
// header, youzan's X-Nsqext-<key>: value; the key is lower-cased.
const extHeaderPrefix = "X-Nsqext-"

// pubExt is youzan's /pub_ext?topic=T[&partition=P]&ext=<JSON object>: a
// /pub whose message carries a JSON header, on an ext topic. X-Nsqext-
// headers set string keys of it. A "##trace_id" in it is stored as the
// trace ID and answered as /pubtrace answers. It is never forwarded.
func (s *Server) pubExt(w http.ResponseWriter, r *http.Request) {
	t, ok := s.existingTopic(w, r, true)
	if !ok {
		return
	}
	header, ok := extHeader(w, r)
	if !ok {
		return
	}
	if !t.Ext() {
		writeError(w, http.StatusBadRequest, protocol.E_EXT_NOT_SUPPORT)
		return
	}
	trace, traced, msgID, herr := protocol.CheckHeaderID("PUB_EXT", header)
	if herr != nil {
		writeError(w, http.StatusBadRequest, herr.Code)
		return
	}
	body, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	var traces []uint64
	if traced {
		traces = []uint64{trace}
	}
	var ids []string
	if msgID != "" {
		ids = []string{msgID}
	}
	done := make(chan topic.Reply, 1)
	s.Broker.PublishExt(t, partitionArg(r), [][]byte{body}, [][]byte{header}, traces, ids, func(res topic.Reply) { done <- res })
	res := <-done
	if traced {
		writeTraced(w, res, trace)
		return
	}
	if res.Err != nil {
		writeError(w, publishStatus(res.Err), publishCode(res.Err))
		return
	}
	writeOK(w, "OK")
}

// msgIDArg is the message ID a /pub names, by ?msg_id= or by the
// X-Nsqext-##msg_id header /pub_ext also takes; "" for none.
func msgIDArg(r *http.Request) string {
	if id := r.URL.Query().Get("msg_id"); id != "" {
		return id
	}
	return r.Header.Get(extHeaderPrefix + protocol.HeaderMsgID)
}

// pubWithID is a /pub naming a message ID: on an ext topic the ID is kept
// in the message's JSON header, where a new leader finds it again, and
// the publish is taken as /pub_ext takes it, by the partition's leader
// only. Other topics store no header and refuse it.
func (s *Server) pubWithID(w http.ResponseWriter, r *http.Request, t *broker.Topic, body []byte, id string) {
	if !t.Ext() {
		writeError(w, http.StatusBadRequest, protocol.E_EXT_NOT_SUPPORT)
		return
	}
	header, err := json.Marshal(map[string]string{protocol.HeaderMsgID: id})
	if err != nil || len(id) > topic.MaxMsgIDLen {
		writeError(w, http.StatusBadRequest, protocol.E_INVALID_JSON_HEADER)
		return
	}
	done := make(chan topic.Reply, 1)
	s.Broker.PublishExt(t, partitionArg(r), [][]byte{body}, [][]byte{header}, nil, []string{id}, func(res topic.Reply) { done <- res })
	if res := <-done; res.Err != nil {
		writeError(w, publishStatus(res.Err), publishCode(res.Err))
		return
	}
	writeOK(w, "OK")
}

// extHeader builds the JSON header from ?ext= and the X-Nsqext- headers.
// youzan unescapes ?ext= once more after the query's own decoding; so does
// this, for the clients that escape it twice.
func extHeader(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	raw := r.URL.Query().Get("ext")
	if v, err := url.QueryUnescape(raw); err == nil {
		raw = v
	}
	var fields map[string]any
	if raw == "" || json.Unmarshal([]byte(raw), &fields) != nil || fields == nil {
		writeError(w, http.StatusBadRequest, protocol.E_INVALID_JSON_HEADER)
		return nil, false
	}
	for k := range r.Header {
		if key, ok := strings.CutPrefix(k, extHeaderPrefix); ok {
			fields[strings.ToLower(key)] = r.Header.Get(k)
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		writeError(w, http.StatusBadRequest, protocol.E_INVALID_JSON_HEADER)
		return nil, false
	}
	return b, true
}
