package httpapi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/protocol"
)

// topicParam reads and validates ?topic= as nsqd's topic endpoints do.
func topicParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return "", false
	}
	if !protocol.IsValidTopicName(name) {
		writeError(w, http.StatusBadRequest, "INVALID_TOPIC")
		return "", false
	}
	return name, true
}

// partitionParam reads ?partition= of youzan's partition operations, or
// answers 400 MISSING_ARG_TOPIC_PARTITION or INVALID_ARG_TOPIC_PARTITION_NUM.
func partitionParam(w http.ResponseWriter, r *http.Request) (int32, bool) {
	v := r.URL.Query().Get("partition")
	if v == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC_PARTITION")
		return 0, false
	}
	p, err := strconv.ParseInt(v, 10, 32)
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPIC_PARTITION_NUM")
		return 0, false
	}
	return int32(p), true
}

// existingTopic finds ?topic= or answers 404 TOPIC_NOT_FOUND.
func (s *Server) existingTopic(w http.ResponseWriter, r *http.Request, validate bool) (*broker.Topic, bool) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return nil, false
	}
	if validate && !protocol.IsValidTopicName(name) {
		writeError(w, http.StatusBadRequest, "INVALID_TOPIC")
		return nil, false
	}
	t := s.Broker.Topic(name)
	if t == nil {
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return nil, false
	}
	return t, true
}

// readLimited reads a request body, reporting whether it exceeded max.
func readLimited(r *http.Request, max int64) ([]byte, bool, error) {
	if r.ContentLength > max {
		return nil, true, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, false, err
	}
	return body, int64(len(body)) > max, nil
}

// readBody reads a request body of at most max bytes, answering the
// client itself when it is unreadable or too big.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	body, tooBig, err := readLimited(r, max)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	case tooBig:
		writeError(w, http.StatusRequestEntityTooLarge, "BODY_TOO_BIG")
	default:
		return body, true
	}
	return nil, false
}

// readMessage reads one message body as /pub takes it, answering the
// client itself when it is unreadable, too big or empty.
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, tooBig, err := readLimited(r, s.Limits.MaxMsgSize)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	case tooBig:
		writeError(w, http.StatusRequestEntityTooLarge, "MSG_TOO_BIG")
	case len(body) == 0:
		writeError(w, http.StatusBadRequest, "MSG_EMPTY")
	default:
		return body, true
	}
	return nil, false
}

func (s *Server) pub(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	t, ok := s.createTopic(w, r)
	if !ok {
		return
	}
	if id := msgIDArg(r); id != "" {
		if r.URL.Query().Has("defer") {
			// A deferred copy is not kept apart by ID: refused rather
			// than written without the window.
			writeError(w, http.StatusBadRequest, "INVALID_DEFER")
			return
		}
		s.pubWithID(w, r, t, body, id)
		return
	}
	var deliverAt int64
	if _, present := r.URL.Query()["defer"]; present {
		ms, ok := intParam(r, "defer")
		if !ok || ms < 0 || time.Duration(ms)*time.Millisecond > s.Limits.MaxReqTimeout {
			writeError(w, http.StatusBadRequest, "INVALID_DEFER")
			return
		}
		if ms > 0 {
			deliverAt = time.Now().Add(time.Duration(ms) * time.Millisecond).UnixNano()
		}
	}
	s.publish(w, r, t, [][]byte{body}, deliverAt)
}

func (s *Server) mpub(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(w, r, s.Limits.MaxBodySize)
	if !ok {
		return
	}
	t, ok := s.createTopic(w, r)
	if !ok {
		return
	}
	var bodies [][]byte
	if isBinary(r) {
		var err error
		bodies, err = s.binaryBodies(body)
		if err != nil {
			var perr *protocol.Error
			code := "BAD_BODY"
			if errors.As(err, &perr) {
				code = perr.Code[len("E_"):]
			}
			writeError(w, http.StatusRequestEntityTooLarge, code)
			return
		}
	} else {
		for _, line := range bytes.Split(body, []byte("\n")) {
			if len(line) == 0 {
				continue
			}
			if int64(len(line)) > s.Limits.MaxMsgSize {
				writeError(w, http.StatusRequestEntityTooLarge, "MSG_TOO_BIG")
				return
			}
			bodies = append(bodies, line)
		}
	}
	if len(bodies) == 0 {
		writeOK(w, "OK")
		return
	}
	s.publish(w, r, t, bodies, 0)
}

// isBinary follows nsqd: true/1 binary, false/0 text, anything else binary.
func isBinary(r *http.Request) bool {
	v, ok := r.URL.Query()["binary"]
	if !ok {
		return false
	}
	return len(v) == 0 || (v[0] != "false" && v[0] != "0")
}

// binaryBodies decodes the MPUB body format without its outer size.
func (s *Server) binaryBodies(body []byte) ([][]byte, error) {
	var size [4]byte
	binary.BigEndian.PutUint32(size[:], uint32(len(body)))
	return protocol.ReadMPUBBody(io.MultiReader(bytes.NewReader(size[:]), bytes.NewReader(body)), s.Limits.MaxBodySize, s.Limits.MaxMsgSize)
}

func (s *Server) createTopic(w http.ResponseWriter, r *http.Request) (*broker.Topic, bool) {
	name, ok := topicParam(w, r)
	if !ok {
		return nil, false
	}
	t, err := s.Broker.CreateTopic(r.Context(), name, 0)
	if err != nil {
		if errors.Is(err, broker.ErrExiting) {
			writeError(w, http.StatusServiceUnavailable, "EXITING")
		} else if errors.Is(err, broker.ErrTooManyTopics) {
			writeError(w, http.StatusBadRequest, "TOO_MANY_TOPICS")
		} else {
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		}
		return nil, false
	}
	return t, true
}

func (s *Server) publish(w http.ResponseWriter, r *http.Request, t *broker.Topic, bodies [][]byte, deliverAt int64) {
	partition := -1
	if p, ok := intParam(r, "partition"); ok {
		partition = p
	}
	fwd, err := broker.ForwardedBy(r.Header)
	if errors.Is(err, broker.ErrBadEpoch) {
		writeError(w, http.StatusBadRequest, "INVALID_FORWARD_EPOCH")
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_FORWARD_DEADLINE")
		return
	}
	fwd.Request = r.Context()
	res := s.Broker.PublishWait(t, partition, bodies, deliverAt, fwd)
	if res.Err != nil && fwd.By != "" {
		writeError(w, publishStatus(res.Err), forwardedCode(res.Err))
		return
	}
	if res.Err != nil {
		writeError(w, publishStatus(res.Err), publishCode(res.Err))
		return
	}
	writeOK(w, "OK")
}

func publishStatus(err *topic.Error) int {
	if err == topic.ErrExiting {
		return http.StatusServiceUnavailable
	}
	if err.Local {
		return http.StatusInternalServerError
	}
	return http.StatusServiceUnavailable
}

func publishCode(err *topic.Error) string {
	if err == topic.ErrExiting {
		return "EXITING"
	}
	if err.Local {
		return "INTERNAL_ERROR"
	}
	return err.Code[len("E_"):]
}

func (s *Server) topicCreate(w http.ResponseWriter, r *http.Request) {
	name, ok := topicParam(w, r)
	if !ok {
		return
	}
	// Absent or 0 means the node's default; anything not a count is refused
	// rather than silently defaulted.
	n, ok := 0, true
	if _, present := r.URL.Query()["partition_num"]; present {
		n, ok = intParam(r, "partition_num")
	}
	if !ok || n < 0 || n > topic.MaxPartitions {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_PARTITION_NUM")
		return
	}
	replicas, ok := 0, true
	if _, present := r.URL.Query()["replicator"]; present {
		replicas, ok = intParam(r, "replicator")
	}
	if !ok || replicas < 0 {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_REPLICATOR")
		return
	}
	spec := broker.TopicSpec{Partitions: n, Replicas: replicas, Ordered: boolParam(r, "ordered", false)}
	spec.Ext = boolParam(r, "extend", false)
	// youzan's orderedmulti is Partita's ordered.
	spec.Ordered = spec.Ordered || r.URL.Query().Get("orderedmulti") == "true"
	if spec.Settings, ok = createSettings(w, r); !ok {
		return
	}
	if _, err := s.Broker.CreateTopicWith(r.Context(), name, spec); err != nil {
		if errors.Is(err, broker.ErrNotEnoughNodes) {
			writeError(w, http.StatusBadRequest, "NOT_ENOUGH_NODES")
			return
		}
		if errors.Is(err, broker.ErrTooManyTopics) {
			writeError(w, http.StatusBadRequest, "TOO_MANY_TOPICS")
			return
		}
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	writeOK(w, nil)
}

// topicDelete deletes the topic cluster-wide, whichever node is asked.
func (s *Server) topicDelete(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	if !protocol.IsValidTopicName(name) {
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return
	}
	// nsqadmin's "tombstone" means: drop this node's copy only. A Partita
	// delete drops the topic everywhere, so it is refused instead.
	if taken, err := s.Broker.TakeTombstone(r.Context(), name, s.httpAddress()); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	} else if taken {
		writeError(w, http.StatusConflict, "TOPIC_TOMBSTONED")
		return
	}
	if err := s.Broker.DeleteTopic(r.Context(), name); err != nil {
		writeBrokerError(w, err)
		return
	}
	writeOK(w, nil)
}

func (s *Server) topicEmpty(w http.ResponseWriter, r *http.Request) {
	t, ok := s.existingTopic(w, r, true)
	if !ok {
		return
	}
	s.Broker.EmptyTopic(t)
	writeOK(w, nil)
}

func (s *Server) topicPause(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		t, ok := s.existingTopic(w, r, false)
		if !ok {
			return
		}
		if err := s.Broker.PauseTopic(r.Context(), t, paused); err != nil {
			writeBrokerError(w, err)
			return
		}
		writeOK(w, nil)
	}
}

// channelArgs reads ?topic=&channel= with the _ARG_ codes nsqd uses here.
func (s *Server) channelArgs(w http.ResponseWriter, r *http.Request) (*broker.Topic, string, bool) {
	tn, cn, ok := channelNames(w, r)
	if !ok {
		return nil, "", false
	}
	t := s.Broker.Topic(tn)
	if t == nil {
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return nil, "", false
	}
	return t, cn, true
}

// channelNames reads and checks the topic and channel parameters.
func channelNames(w http.ResponseWriter, r *http.Request) (string, string, bool) {
	q := r.URL.Query()
	tn, cn := q.Get("topic"), q.Get("channel")
	switch {
	case tn == "":
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
	case !protocol.IsValidTopicName(tn):
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPIC")
	case cn == "":
		writeError(w, http.StatusBadRequest, "MISSING_ARG_CHANNEL")
	case !protocol.IsValidChannelName(cn):
		writeError(w, http.StatusBadRequest, "INVALID_ARG_CHANNEL")
	default:
		return tn, cn, true
	}
	return "", "", false
}

// channelCreate creates the channel cluster-wide, also on a node that holds
// none of the topic's partitions or has not opened the topic yet;
// ?max_attempts= sets its max_attempts, of an existing channel too.
func (s *Server) channelCreate(w http.ResponseWriter, r *http.Request) {
	s.channelSettings(w, r, s.Broker.CreateChannelIn)
}

// channelUpdate is /channel/update?topic&channel&max_attempts=N: the
// channel's settings, cluster-wide; it needs one to change.
func (s *Server) channelUpdate(w http.ResponseWriter, r *http.Request) {
	if _, present := r.URL.Query()["max_attempts"]; !present {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_MAX_ATTEMPTS")
		return
	}
	s.channelSettings(w, r, s.Broker.UpdateChannel)
}

// channelSettings reads a channel's names and settings and applies op.
func (s *Server) channelSettings(w http.ResponseWriter, r *http.Request, op func(ctx context.Context, topicName, name string, spec broker.ChannelSpec) error) {
	tn, name, ok := channelNames(w, r)
	if !ok {
		return
	}
	spec, ok := channelSpec(w, r, tn)
	if !ok {
		return
	}
	if err := op(r.Context(), tn, name, spec); err != nil {
		writeBrokerError(w, err)
		return
	}
	writeOK(w, nil)
}

// channelSpec reads a channel's settings from the query: max_attempts, 0
// to 65535 (0 is none), on a topic whose dead-letter topic can exist.
func channelSpec(w http.ResponseWriter, r *http.Request, topicName string) (broker.ChannelSpec, bool) {
	var spec broker.ChannelSpec
	if _, present := r.URL.Query()["max_attempts"]; !present {
		return spec, true
	}
	n, ok := intParam(r, "max_attempts")
	if !ok || n < 0 || n > math.MaxUint16 {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_MAX_ATTEMPTS")
		return spec, false
	}
	if n > 0 && (topic.IsEphemeral(topicName) || !protocol.IsValidTopicName(broker.DeadLetterTopic(topicName))) {
		// Its dead letters would have nowhere to go.
		writeError(w, http.StatusBadRequest, "INVALID_DEAD_LETTER_TOPIC")
		return spec, false
	}
	max := uint16(n)
	spec.MaxAttempts = &max
	return spec, true
}

func (s *Server) channelDelete(w http.ResponseWriter, r *http.Request) {
	s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
		return s.Broker.DeleteChannel(ctx, t, name)
	})
}

// channelSetOrder is youzan's /channel/setorder?order=true|false.
func (s *Server) channelSetOrder(w http.ResponseWriter, r *http.Request) {
	s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
		return s.Broker.SetChannelOrdered(ctx, t, name, boolParam(r, "order", true))
	})
}

func (s *Server) channelEmpty(w http.ResponseWriter, r *http.Request) {
	s.channelOp(w, r, func(_ context.Context, t *broker.Topic, name string) error {
		return s.Broker.EmptyChannel(t, name)
	})
}

func (s *Server) channelPause(paused bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
			return s.Broker.PauseChannel(ctx, t, name, paused)
		})
	}
}

// channelSkip is youzan's /channel/skip and /channel/unskip: the channel
// drops its backlog and what is published until unskipped.
func (s *Server) channelSkip(skipped bool) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
			return s.Broker.SkipChannel(ctx, t, name, skipped)
		})
	}
}

// channelRateLimit is youzan's /channel/ratelimit?ratekilobytes=: the
// channel delivers at most that many kilobytes a second on each partition,
// 0 lifting the limit.
func (s *Server) channelRateLimit(w http.ResponseWriter, r *http.Request) {
	kb, ok := atLeastParam(w, r, "ratekilobytes", 0)
	if !ok {
		return
	}
	s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
		return s.Broker.SetChannelRateLimit(ctx, t, name, kb)
	})
}

// channelSetClientLimit is youzan's
// /channel/setclientlimit?ready=&client_prefix=: the consumers whose client
// ID or address starts with the prefix (every consumer for none) have
// their RDY capped at ready; a negative ready lifts the prefix's cap.
func (s *Server) channelSetClientLimit(w http.ResponseWriter, r *http.Request) {
	ready, ok := atLeastParam(w, r, "ready", math.MinInt64)
	if !ok {
		return
	}
	prefix := r.URL.Query().Get("client_prefix")
	s.channelOp(w, r, func(ctx context.Context, t *broker.Topic, name string) error {
		return s.Broker.SetChannelClientLimit(ctx, t, name, prefix, ready)
	})
}

// atLeastParam reads a required integer parameter no lower than least,
// answering 400 MISSING_ARG_<NAME> or INVALID_ARG_<NAME> otherwise.
func atLeastParam(w http.ResponseWriter, r *http.Request, name string, least int64) (int64, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_"+strings.ToUpper(name))
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < least {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_"+strings.ToUpper(name))
		return 0, false
	}
	return n, true
}

func (s *Server) channelOp(w http.ResponseWriter, r *http.Request, op func(context.Context, *broker.Topic, string) error) {
	t, name, ok := s.channelArgs(w, r)
	if !ok {
		return
	}
	if err := op(r.Context(), t, name); err != nil {
		writeBrokerError(w, err)
		return
	}
	writeOK(w, nil)
}

func writeBrokerError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, broker.ErrTopicNotFound):
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
	case errors.Is(err, broker.ErrChannelNotFound):
		writeError(w, http.StatusNotFound, "CHANNEL_NOT_FOUND")
	case errors.Is(err, broker.ErrExiting):
		writeError(w, http.StatusServiceUnavailable, "EXITING")
	default:
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
	}
}
