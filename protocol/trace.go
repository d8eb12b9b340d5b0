package protocol

import (
	"encoding/binary"

	"github.com/partitamq/partita/broker"
)

// Traced publishing (youzan's PUB_TRACE and MPUB_TRACE): every body starts
// with an 8-byte trace ID, which is stored with the message. The answer is
// "OK" followed by the message ID, the trace ID, the log offset of the
// message and the bytes it takes on disk, so a producer can find its message
// later with /message/get. For MPUB_TRACE the ID, trace and offset are the
// first message's and the size is the whole batch's.

const traceIDSize = 8

// TracedOKSize is the length of a traced publish's answer.
const TracedOKSize = 2 + 8 + 8 + 8 + 4

// TracedOK is the answer to a traced publish.
func TracedOK(id, trace uint64, offset int64, size int32) []byte {
	b := append([]byte(nil), okBytes...)
	b = binary.BigEndian.AppendUint64(b, id)
	b = binary.BigEndian.AppendUint64(b, trace)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	return binary.BigEndian.AppendUint32(b, uint32(size))
}

// splitTrace takes the trace ID off the front of a traced body.
func splitTrace(cmd string, body []byte) (uint64, []byte, error) {
	if len(body) <= traceIDSize {
		return 0, nil, Fatal(E_BAD_MESSAGE, "%s message of %d bytes has no body after its trace ID", cmd, len(body))
	}
	return binary.BigEndian.Uint64(body), body[traceIDSize:], nil
}

func (s *session) pubTrace(params [][]byte) error {
	if err := checkTopic("PUB_TRACE", params, 1); err != nil {
		return err
	}
	body, err := ReadMessageBody(s.r, "PUB_TRACE", s.lim.MaxMsgSize+traceIDSize)
	if err != nil {
		return err
	}
	trace, body, err := splitTrace("PUB_TRACE", body)
	if err != nil {
		return err
	}
	t, err := s.createTopic("PUB", string(params[0]))
	if err != nil {
		return err
	}
	s.publishTraced("PUB_TRACE", t, partitionParam(params, 1), [][]byte{body}, []uint64{trace})
	return nil
}

func (s *session) mpubTrace(params [][]byte) error {
	if err := checkTopic("MPUB_TRACE", params, 1); err != nil {
		return err
	}
	t, err := s.createTopic("MPUB", string(params[0]))
	if err != nil {
		return err
	}
	bodies, err := ReadMPUBBody(s.r, s.lim.MaxBodySize, s.lim.MaxMsgSize+traceIDSize)
	if err != nil {
		return err
	}
	traces := make([]uint64, len(bodies))
	for i, b := range bodies {
		if traces[i], bodies[i], err = splitTrace("MPUB_TRACE", b); err != nil {
			return err
		}
	}
	s.publishTraced("MPUB_TRACE", t, partitionParam(params, 1), bodies, traces)
	return nil
}

// publishTraced is publish with the traced answer. Traced publishes are not
// forwarded: the producers that trace are youzan's partition-aware clients,
// which publish to the leader and retry on E_FAILED_ON_NOT_LEADER.
func (s *session) publishTraced(cmd string, t *broker.Topic, partition int, bodies [][]byte, traces []uint64) {
	s.publishExt(cmd, t, partition, bodies, nil, traces, nil, true)
}
