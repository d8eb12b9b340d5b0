package protocol

import (
	"encoding/binary"
	"encoding/json"
	"strconv"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/storage"
)

// youzan's message headers. PUB_EXT <topic> [<partition>] carries a 2-byte
// header length, the header (a JSON object) and the body; MPUB_EXT lays out
// each of its messages the same way, a header of length 0 meaning none.
// Only ext topics take headers; a plain PUB or MPUB to one stores messages
// without. A header's "##trace_id", a decimal string, is stored as the
// message's trace ID, and PUB_EXT then answers as PUB_TRACE does. A
// "##msg_id", a string, names the message for the topic's dedupe window
// (topic.Dedupe): a retry with the same ID is answered as the first and
// not written again.

// Reserved header keys, youzan's.
const (
	HeaderTraceID     = "##trace_id"
	HeaderMsgID       = topic.HeaderMsgID
	HeaderDispatchTag = "##client_dispatch_tag"
)

const headerLenSize = 2

// CheckHeader validates a message's JSON header and returns the trace ID
// it names, if any. The errors are youzan's, non-fatal.
func CheckHeader(cmd string, h []byte) (trace uint64, traced bool, err *Error) {
	trace, traced, _, err = CheckHeaderID(cmd, h)
	return trace, traced, err
}

// CheckHeaderID is CheckHeader that also returns the message ID the header
// names, "" for none: a non-empty string of at most topic.MaxMsgIDLen
// bytes, or the header is refused. It is returned as the dedupe window
// knows it (topic.ScopedMsgID): a dead letter's with its origin.
func CheckHeaderID(cmd string, h []byte) (trace uint64, traced bool, msgID string, err *Error) {
	if len(h) > storage.MaxHeaderSize {
		return 0, false, "", NonFatal(E_INVALID_JSON_HEADER, "%s header of %d bytes is above %d", cmd, len(h), storage.MaxHeaderSize)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(h, &fields) != nil || fields == nil {
		return 0, false, "", NonFatal(E_INVALID_JSON_HEADER, "%s header is not a JSON object", cmd)
	}
	if raw, ok := fields[HeaderMsgID]; ok {
		if json.Unmarshal(raw, &msgID) != nil || msgID == "" || len(msgID) > topic.MaxMsgIDLen {
			return 0, false, "", NonFatal(E_INVALID_JSON_HEADER, "%s %s should be a string of 1 to %d bytes", cmd, HeaderMsgID, topic.MaxMsgIDLen)
		}
		msgID = topic.ScopedMsgID(msgID, fields)
	}
	trace, traced, err = traceOf(cmd, fields)
	return trace, traced, msgID, err
}

// traceOf reads a header's trace ID, if it names one.
func traceOf(cmd string, fields map[string]json.RawMessage) (trace uint64, traced bool, err *Error) {
	raw, ok := fields[HeaderTraceID]
	if !ok {
		return 0, false, nil
	}
	var text string
	if json.Unmarshal(raw, &text) != nil {
		return 0, false, NonFatal(INVALID_TRACE_ID, "%s trace ID should be a string", cmd)
	}
	trace, perr := strconv.ParseUint(text, 10, 64)
	if perr != nil {
		return 0, false, NonFatal(INVALID_TRACE_ID, "%s invalid trace ID %q", cmd, text)
	}
	return trace, true, nil
}

// splitHeader takes the header off the front of an ext body; the body after
// it may not be empty.
func splitHeader(cmd string, b []byte) (header, body []byte, err error) {
	if len(b) <= headerLenSize {
		return nil, nil, Fatal(E_BAD_BODY, "%s invalid body size %d with a header", cmd, len(b))
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) <= headerLenSize+n {
		return nil, nil, Fatal(E_BAD_BODY, "%s invalid body size %d for a header of %d bytes", cmd, len(b), n)
	}
	return b[headerLenSize : headerLenSize+n], b[headerLenSize+n:], nil
}

func extNotSupported(cmd, topicName string) error {
	return NonFatal(E_EXT_NOT_SUPPORT, "%s ext content not supported in topic %s", cmd, topicName)
}

func (s *session) pubExt(params [][]byte) error {
	const cmd = "PUB_EXT"
	if err := checkTopic(cmd, params, 1); err != nil {
		return err
	}
	b, err := ReadMessageBody(s.r, cmd, s.lim.MaxMsgSize)
	if err != nil {
		return err
	}
	header, body, err := splitHeader(cmd, b)
	if err != nil {
		return err
	}
	// youzan refuses an empty header here; MPUB_EXT takes it as none.
	trace, traced, msgID, herr := CheckHeaderID(cmd, header)
	if herr != nil {
		return herr
	}
	if err := s.checkAuth(cmd, PermissionPublish, string(params[0]), ""); err != nil {
		return err
	}
	t, err := s.createTopic("PUB", string(params[0]))
	if err != nil {
		return err
	}
	if !t.Ext() {
		return extNotSupported(cmd, t.Name)
	}
	var traces []uint64
	if traced {
		traces = []uint64{trace}
	}
	var ids []string
	if msgID != "" {
		ids = []string{msgID}
	}
	s.publishExt(cmd, t, partitionParam(params, 1), [][]byte{body}, [][]byte{header}, traces, ids, traced)
	return nil
}

func (s *session) mpubExt(params [][]byte) error {
	const cmd = "MPUB_EXT"
	t, bodies, err := s.readMPUB(cmd, params)
	if err != nil {
		return err
	}
	headers := make([][]byte, len(bodies))
	var traces []uint64
	var ids []string
	for i, b := range bodies {
		if headers[i], bodies[i], err = splitHeader(cmd, b); err != nil {
			return err
		}
		if len(headers[i]) == 0 {
			continue
		}
		if !t.Ext() {
			return extNotSupported(cmd, t.Name)
		}
		trace, traced, msgID, herr := CheckHeaderID(cmd, headers[i])
		if herr != nil {
			return herr
		}
		if msgID != "" {
			if ids == nil {
				ids = make([]string, len(bodies))
			}
			ids[i] = msgID
		}
		if traced {
			if traces == nil {
				traces = make([]uint64, len(bodies))
			}
			traces[i] = trace
		}
	}
	s.publishExt(cmd, t, partitionParam(params, 1), bodies, headers, traces, ids, false)
	return nil
}

// publishExt is publish with headers, trace IDs and message IDs (any may
// be nil); tracedOK answers with where the first message went, as
// PUB_TRACE does.
func (s *session) publishExt(cmd string, t *broker.Topic, partition int, bodies, headers [][]byte, traces []uint64, ids []string, tracedOK bool) {
	r := &reply{pending: true, frameType: FrameTypeResponse, data: okBytes}
	s.send(r)
	s.pubMu.Lock()
	s.pubCounts[t.Name] += int64(len(bodies))
	s.pubMu.Unlock()
	s.srv.Broker.PublishExt(t, partition, bodies, headers, traces, ids, func(res topic.Reply) {
		switch {
		case res.Err != nil:
			e := publishError(cmd, res.Err)
			r.frameType, r.data, r.fatal = FrameTypeError, []byte(e.Error()), e.Fatal
		case tracedOK:
			r.data = TracedOK(res.MsgID, traces[0], res.Offset, res.Size)
		}
		s.answered(r)
	})
}
