package replication

import (
	"errors"
	"fmt"
	"time"

	"github.com/partitamq/partita/messages"
)

// checkWrite refuses a write the partition could not even look at. Whether
// it fits the log (epoch, offsets, sizes) is the partition's decision.
func checkWrite(w *messages.ReplicaWrite) error {
	switch {
	case w == nil:
		return errors.New("replica write frame without a write")
	case w.GetTopic() == "":
		return errors.New("replica write without a topic")
	case w.GetPartition() < 0:
		return errors.New("replica write to a negative partition")
	case w.GetEmptyLog() && (w.GetRecord() != nil || len(w.GetMessages()) > 0):
		return errors.New("probe of an empty log with a record")
	case w.GetEmptyLog():
		return nil
	case w.GetRecord() == nil:
		return errors.New("replica write without a record")
	case w.GetRecord().GetMsgNum() < 1:
		return errors.New("replica write record without messages")
	case len(w.GetMessages()) == 0:
		return errors.New("replica write without message bytes")
	}
	return nil
}

// checkWrites refuses a frame of writes that are not all of one partition
// or that has a write checkWrite refuses: the frame is refused whole.
func checkWrites(ws []*messages.ReplicaWrite) error {
	if len(ws) == 0 {
		return errors.New("replica writes frame without writes")
	}
	for i, w := range ws {
		if err := checkWrite(w); err != nil {
			return fmt.Errorf("write %d of %d: %w", i+1, len(ws), err)
		}
		if w.GetTopic() != ws[0].GetTopic() || w.GetPartition() != ws[0].GetPartition() {
			return fmt.Errorf("write %d of %d is of another partition than the first", i+1, len(ws))
		}
	}
	return nil
}

// refusals answers every write of a frame that failed checkWrites, except
// an empty frame, which has nothing to answer.
func refusals(ws []*messages.ReplicaWrite, err error) []*messages.ReplicaAck {
	acks := make([]*messages.ReplicaAck, len(ws))
	for i, w := range ws {
		acks[i] = refusal(w, err)
	}
	return acks
}

// refusal answers a write that failed checkWrite. The code is the one the
// partition actor gives a record that does not match its messages.
func refusal(w *messages.ReplicaWrite, err error) *messages.ReplicaAck {
	return &messages.ReplicaAck{
		Topic:     w.GetTopic(),
		Partition: w.GetPartition(),
		LogId:     w.GetRecord().GetLogId(),
		Kind:      messages.ErrorKind_ERROR_KIND_FOLLOWER,
		Code:      "E_FAILED_ON_NOT_WRITABLE",
		Text:      err.Error(),
	}
}

func checkOffset(u *messages.ChannelOffsetUpdate) error {
	switch {
	case u == nil:
		return errors.New("offset frame without an update")
	case u.GetTopic() == "" || u.GetChannel() == "":
		return errors.New("offset update without a topic or channel")
	case u.GetPartition() < 0:
		return errors.New("offset update for a negative partition")
	}
	return nil
}

func heartbeat(node string) *messages.Heartbeat {
	return &messages.Heartbeat{NodeId: node, UnixNano: time.Now().UnixNano()}
}
