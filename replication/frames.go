package replication

import (
	"errors"
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
	case w.GetRecord() == nil:
		return errors.New("replica write without a record")
	case w.GetRecord().GetMsgNum() < 1:
		return errors.New("replica write record without messages")
	case len(w.GetMessages()) == 0:
		return errors.New("replica write without message bytes")
	}
	return nil
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
