package httpapi

import (
	"cmp"
	"errors"
	"net/http"
	"strconv"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/storage"
)

// messageJSON is /message/get's answer: the message as stored and where it
// stands in each channel of its partition on this node.
type messageJSON struct {
	ID             string                 `json:"id"`
	Timestamp      int64                  `json:"timestamp"`
	Body           string                 `json:"body"`
	Partition      int                    `json:"partition"`
	Offset         int64                  `json:"offset"`
	Size           int32                  `json:"raw_size"`
	Count          int64                  `json:"count"`
	TraceID        uint64                 `json:"trace_id,omitempty"`
	DeliverAt      int64                  `json:"deliver_at,omitempty"`
	DelayedOrigID  string                 `json:"delayed_orig_id,omitempty"`
	DelayedChannel string                 `json:"delayed_channel,omitempty"`
	Ext            string                 `json:"ext,omitempty"` // the JSON header, as youzan names it
	Leader         bool                   `json:"is_leader"`
	Channels       []channel.MessageState `json:"channels"`
}

var searchModes = map[string]storage.SearchMode{
	"id":             storage.ByID,
	"count":          storage.ByCount,
	"virtual_offset": storage.ByOffset,
}

// messageGet is youzan's /message/get?topic&partition&search_mode&search_pos.
// An ID is its 16 hex digits as clients see it, or the decimal number.
func (s *Server) messageGet(w http.ResponseWriter, r *http.Request) {
	t, ok := s.existingTopic(w, r, true)
	if !ok {
		return
	}
	q := r.URL.Query()
	p, err := strconv.Atoi(q.Get("partition"))
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
		return
	}
	mode, ok := searchModes[q.Get("search_mode")]
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_SEARCH_MODE")
		return
	}
	pos, ok := searchPos(mode, q.Get("search_pos"))
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_SEARCH_POS")
		return
	}
	f, err := s.Broker.FindMessage(t, p, mode, pos)
	if err != nil {
		writeFindError(w, err)
		return
	}
	m := f.Message
	out := messageJSON{
		ID: idHex(m.ID), Timestamp: m.Timestamp, Body: string(m.Body), Partition: p,
		Offset: m.Offset, Size: m.Size, Count: m.Count, TraceID: m.TraceID, DeliverAt: m.DeliverAt,
		DelayedChannel: m.DelayedChannel, Leader: f.Leader, Channels: f.Channels, Ext: string(m.Header),
	}
	if m.DelayedChannel != "" {
		out.DelayedOrigID = idHex(m.DelayedOrigID)
	}
	if out.Channels == nil {
		out.Channels = []channel.MessageState{}
	}
	writeOK(w, out)
}

// writeFindError answers a message that could not be read where it was
// looked for.
func writeFindError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, broker.ErrPartitionNotHere):
		writeError(w, http.StatusNotFound, "PARTITION_NOT_FOUND")
	case errors.Is(err, storage.ErrNotFound):
		writeError(w, http.StatusNotFound, "MESSAGE_NOT_FOUND")
	default:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	}
}

func searchPos(mode storage.SearchMode, s string) (int64, bool) {
	if mode == storage.ByID && len(s) == 16 {
		id, err := storage.DecodeID([]byte(s))
		return int64(id), err == nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

func idHex(id uint64) string {
	var b [16]byte
	storage.EncodeID(b[:], id)
	return string(b[:])
}

// channelSetOffset is youzan's /channel/setoffset?topic&channel&partition:
// the position (timestamp:<sec>, msgcount:<n>, virtual_queue:<bytes> or
// special:-1) comes in the body or in ?position=. It answers where the
// channel now starts, once every ISR member is there.
func (s *Server) channelSetOffset(w http.ResponseWriter, r *http.Request) {
	t, name, ok := s.channelArgs(w, r)
	if !ok {
		return
	}
	p := 0
	if v := r.URL.Query().Get("partition"); v != "" {
		var err error
		if p, err = strconv.Atoi(v); err != nil || p < 0 {
			writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
			return
		}
	}
	raw := r.URL.Query().Get("position")
	if raw == "" {
		body, _, err := readLimited(r, 1024)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
			return
		}
		raw = string(body)
	}
	sp, err := broker.ParseStartPosition(raw)
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_POSITION")
		return
	}
	res, err := s.Broker.SetChannelOffset(r.Context(), t, p, name, sp)
	switch {
	case err == nil:
		writeOK(w, map[string]int64{"offset": res.Offset, "count": res.Count})
	case errors.Is(err, broker.ErrPartitionNotHere), errors.Is(err, topic.ErrNotLeader):
		writeError(w, http.StatusBadRequest, "FAILED_ON_NOT_LEADER")
	case errors.Is(err, topic.ErrOffsetNotReplicated):
		writeError(w, http.StatusInternalServerError, "FAILED_ON_NOT_WRITABLE")
	default:
		writeBrokerError(w, err)
	}
}

// messageFinish is youzan's /message/finish?topic&channel&partition&msgid:
// it finishes one message, in flight to any consumer or waiting for its
// next delivery, on the partition's leader (elsewhere FAILED_ON_NOT_LEADER,
// as /channel/setoffset). The ID is the message's 16 hex characters or
// its decimal value.
func (s *Server) messageFinish(w http.ResponseWriter, r *http.Request) {
	t, name, ok := s.channelArgs(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	p, err := strconv.Atoi(cmp.Or(q.Get("partition"), "0"))
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
		return
	}
	id, ok := messageID(q.Get("msgid"))
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_MSGID")
		return
	}
	switch err := s.Broker.FinishMessage(r.Context(), t, p, name, id); {
	case err == nil:
		writeOK(w, nil)
	case errors.Is(err, broker.ErrPartitionNotHere), errors.Is(err, topic.ErrNotLeader):
		writeError(w, http.StatusBadRequest, "FAILED_ON_NOT_LEADER")
	case errors.Is(err, channel.ErrNotInFlight):
		writeError(w, http.StatusNotFound, "MESSAGE_NOT_WAITING")
	default:
		writeBrokerError(w, err)
	}
}

func messageID(s string) (uint64, bool) {
	if len(s) == 16 {
		if id, err := storage.DecodeID([]byte(s)); err == nil {
			return id, true
		}
	}
	id, err := strconv.ParseUint(s, 10, 64)
	return id, err == nil
}
