package topic

import (
	"time"

	"github.com/partitamq/partita/storage"
)

// A record holds the messages of one or more publishes, encoded back to
// back exactly as they are appended and replicated.

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
	if i < len(p.Headers) {
		m.Header = p.Headers[i]
	}
	if d := p.Delayed; d != nil {
		m.DelayedChannel, m.DelayedOrigID, m.DelayedAttempts = d.Channel, d.OrigID, d.Attempts
	}
	return m
}
