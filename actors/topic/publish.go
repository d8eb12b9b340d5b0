package topic

import (
	"time"

	"github.com/partitamq/partita/storage"
)

// DelayedCopy says a publish is the copy of a message one channel REQ'd with
// a long delay (docs/replication.md#delayed-copy): the copy goes into the
// partition log with its delivery time, so it is replicated and survives
// restarts like any write, and only the named channel delivers it.
type DelayedCopy struct {
	Channel  string
	OrigID   uint64
	Attempts uint16
}

// span is where one publish's messages landed in a write.
type span struct {
	id     uint64
	offset int64
	size   int32
}

// publishedMessage is the stored form of body i of p, without its body.
func publishedMessage(p Publish, i int, id uint64, now time.Time) storage.Message {
	m := storage.Message{ID: id, Timestamp: now.UnixNano(), DeliverAt: p.DeliverAt}
	if i < len(p.Traces) {
		m.TraceID = p.Traces[i]
	}
	if d := p.Delayed; d != nil {
		m.DelayedChannel, m.DelayedOrigID, m.DelayedAttempts = d.Channel, d.OrigID, d.Attempts
	}
	return m
}
