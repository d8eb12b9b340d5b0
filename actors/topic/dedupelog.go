package topic

import (
	"errors"

	"github.com/partitamq/partita/storage"
)

// The actor's side of the dedupe window (dedupe.go): applying the setting
// and rebuilding the window from the committed log when this node starts
// to lead, so that a retry sent to a new leader, or to this one after a
// restart, is recognised.

// applyDedupe gives the writer the partition's dedupe setting, and builds
// the window from the log when it starts.
func (a *Actor) applyDedupe() {
	if !a.leads() || a.writer == nil {
		return
	}
	before := a.writer.Dedupe()
	if a.writer.SetDedupe(a.opt.Dedupe) {
		a.rebuildDedupe()
	}
	if before != nil && a.writer.Dedupe() == nil {
		a.dedupeHits += before.Hits()
	}
}

// replaceWriter puts w in place of the current writer, keeping the count
// of duplicates the old one answered.
func (a *Actor) replaceWriter(w *Writer) {
	if a.writer != nil {
		a.dedupeHits += a.writer.Dedupe().Hits()
	}
	a.writer = w
}

// dedupeRebuildChunk is how much of the log one read of the rebuild takes.
const dedupeRebuildChunk = 1 << 20

// rebuildDedupe remembers the IDs of the committed messages stamped within
// the window, read from the first such message to the committed end: the
// same log every ISR member holds, so a new leader knows what its
// predecessor wrote. Channels' delayed copies carry their original's header
// and are not publishes; they are skipped. What cannot be read is logged,
// and the window holds what was read before it.
func (a *Actor) rebuildDedupe() {
	d := a.writer.Dedupe()
	from := a.opt.Now().Add(-d.Config().Window).UnixNano()
	off, _, err := a.opt.Store.Seek(storage.ByTime, from)
	if err != nil {
		a.opt.Logger.Error("rebuilding the dedupe window", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		return
	}
	end, _ := a.opt.Store.Committed()
	buf := make([]byte, dedupeRebuildChunk)
	for off < end {
		msgs, next, err := a.opt.Store.Log.ReadMessages(off, end, buf)
		if err == nil && next <= off {
			err = errors.New("no progress reading the log")
		}
		if err != nil {
			a.opt.Logger.Error("rebuilding the dedupe window", "topic", a.opt.Topic, "partition", a.opt.Partition, "offset", off, "err", err)
			return
		}
		for _, m := range msgs {
			if m.DelayedChannel != "" || m.Timestamp < from {
				continue
			}
			if id := MsgIDOf(m.Header); id != "" {
				d.Remember(id, m.ID, m.Offset, m.Size, m.Timestamp)
			}
		}
		off = next
	}
}
