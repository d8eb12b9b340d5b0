package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/storage"
)

// channelRedrive is /channel/redrive?topic=T&channel=C&partition=P&msgid=ID:
// the dead letter ID (16 hex digits, or the decimal number) of partition
// P of T.dead, moved there from channel C of T, goes back to C as a copy
// only C delivers, at once and with its deliveries counted afresh
// (broker.Redrive). The call is passed on to the leader of T.dead's
// partition when this node does not hold it, and the copy to the origin
// partition's leader; it answers where the copy went once that
// partition's ISR has it.
func (s *Server) channelRedrive(w http.ResponseWriter, r *http.Request) {
	tn, name, ok := channelNames(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	if q.Has("to_partition") {
		s.redriveCopy(w, r, tn, name)
		return
	}
	p, err := strconv.Atoi(q.Get("partition"))
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
		return
	}
	id, ok := searchPos(storage.ByID, q.Get("msgid"))
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_MSGID")
		return
	}
	forwarded := r.Header.Get(broker.ForwardedHeader) != ""
	dead := broker.DeadLetterTopic(tn)
	var rd broker.Redrive
	if dt := s.Broker.Topic(dead); dt == nil {
		err = broker.ErrPartitionNotHere
	} else {
		rd, err = s.Broker.ReadDeadLetter(dt, p, uint64(id))
	}
	if errors.Is(err, broker.ErrPartitionNotHere) && !forwarded {
		// The dead-letter partition's leader holds it.
		body, err := s.passOn(r, dead, p)
		if err != nil {
			writeRefusal(w, err)
			return
		}
		writeOK(w, json.RawMessage(body))
		return
	}
	if err == nil && (rd.Topic != tn || rd.Channel != name) {
		err = broker.ErrNotDeadLetter
	}
	if errors.Is(err, broker.ErrNotDeadLetter) {
		writeError(w, http.StatusBadRequest, broker.ErrNotDeadLetter.Error())
		return
	}
	if err != nil {
		writeFindError(w, err)
		return
	}
	err = s.Broker.RedriveHere(r.Context(), rd)
	if errors.Is(err, broker.ErrPartitionNotHere) || errors.Is(err, topic.ErrNotLeader) {
		// The copy goes to the origin partition's leader.
		cq := url.Values{"topic": {tn}, "channel": {name}, "to_partition": {strconv.Itoa(int(rd.Partition))},
			"orig_id": {strconv.FormatUint(rd.OrigID, 10)}, "ext": {string(rd.Header)}}
		_, err = s.atLeader(r, tn, int(rd.Partition), cq, rd.Body)
	}
	if err != nil {
		writeRefusal(w, err)
		return
	}
	writeOK(w, redriven{Topic: tn, Partition: rd.Partition, Channel: name})
}

// redriven answers /channel/redrive: where the copy went.
type redriven struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Channel   string `json:"channel"`
}

// redriveCopy writes a redriven dead letter's copy another node read into
// the origin partition this node leads; it is never passed on again.
func (s *Server) redriveCopy(w http.ResponseWriter, r *http.Request, tn, name string) {
	q := r.URL.Query()
	p, perr := strconv.ParseInt(q.Get("to_partition"), 10, 32)
	orig, oerr := strconv.ParseUint(q.Get("orig_id"), 10, 64)
	if r.Header.Get(broker.ForwardedHeader) == "" || perr != nil || oerr != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_REDRIVE_COPY")
		return
	}
	body, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	rd := broker.Redrive{Topic: tn, Partition: int32(p), Channel: name, OrigID: orig, Body: body}
	if h := q.Get("ext"); h != "" {
		rd.Header = []byte(h)
	}
	err := s.Broker.RedriveHere(r.Context(), rd)
	switch {
	case errors.Is(err, broker.ErrPartitionNotHere), errors.Is(err, topic.ErrNotLeader):
		writeError(w, http.StatusBadRequest, "FAILED_ON_NOT_LEADER")
	case err != nil:
		writeBrokerError(w, err)
	default:
		writeOK(w, redriven{Topic: tn, Partition: rd.Partition, Channel: name})
	}
}
