package broker

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// Redrive (docs/replication.md#dead-letters): a dead letter goes back to
// the channel it came from as a copy only that channel delivers, as a long
// REQ's delayed copy is, due at once, its deliveries counted afresh. The
// dead letter stays in the dead-letter topic's log.

// ErrNotDeadLetter: the message's header does not name the channel it is
// to go back to as its origin.
var ErrNotDeadLetter = errors.New("NOT_A_DEAD_LETTER_OF_THE_CHANNEL")

// Redrive is a dead letter on its way back: its origin and what the copy
// carries.
type Redrive struct {
	Topic     string
	Partition int32
	Channel   string
	OrigID    uint64 // its ID in the origin partition
	Body      []byte
	Header    []byte // its own header, the origin keys taken out; nil for none
}

// ReadDeadLetter reads the dead letter id of partition p of the
// dead-letter topic dead, held here, and where it came from.
func (b *Broker) ReadDeadLetter(dead *Topic, p int, id uint64) (Redrive, error) {
	f, err := b.FindMessage(dead, p, storage.ByID, int64(id))
	if err != nil {
		return Redrive{}, err
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(f.Message.Header, &fields) != nil {
		return Redrive{}, ErrNotDeadLetter
	}
	origin := func(key string) string {
		var v string
		json.Unmarshal(fields[key], &v)
		delete(fields, key)
		return v
	}
	rd := Redrive{Topic: origin(HeaderOriginTopic), Channel: origin(HeaderOriginChannel), Body: f.Message.Body}
	part, perr := strconv.ParseInt(origin(HeaderOriginPartition), 10, 32)
	orig, ierr := storage.DecodeID([]byte(origin(HeaderOriginMsgID)))
	for k := range fields {
		if strings.HasPrefix(k, "##origin_") {
			delete(fields, k)
		}
	}
	if rd.Topic == "" || rd.Channel == "" || perr != nil || ierr != nil {
		return Redrive{}, ErrNotDeadLetter
	}
	rd.Partition, rd.OrigID = int32(part), orig
	if len(fields) > 0 {
		rd.Header, _ = json.Marshal(fields)
	}
	return rd, nil
}

// RedriveHere writes rd's copy into its origin partition, which this node
// must lead, once the partition's ISR has it.
func (b *Broker) RedriveHere(ctx context.Context, rd Redrive) error {
	t := b.Topic(rd.Topic)
	if t == nil {
		return ErrTopicNotFound
	}
	if _, err := b.leaderChannel(t, int(rd.Partition), rd.Channel); err != nil {
		return err
	}
	var headers [][]byte
	if t.Ext() && len(rd.Header) > 0 {
		headers = [][]byte{rd.Header}
	}
	done := make(chan error, 1)
	b.system.Root.Send(t.Partition(int(rd.Partition)), &topic.Published{
		Bodies:  [][]byte{rd.Body},
		Headers: headers,
		Delayed: &topic.DelayedCopy{Channel: rd.Channel, OrigID: rd.OrigID},
		Reply: func(r topic.Reply) {
			if r.Err != nil {
				done <- r.Err
				return
			}
			done <- nil
		},
	})
	return answer(ctx, done)
}
