package topic

import (
	"bytes"
	"encoding/json"
	"time"
)

// Idempotent publishing (docs/replication.md#dedupe-window). A producer
// names a message with a ##msg_id of its own; within the topic's dedupe
// window, a publish of an ID this partition already wrote is answered as
// the first was and not written again. The window is the leader's memory
// of the IDs in its committed log tail: commits add to it, a new leader
// rebuilds it from its log (actor's rebuildDedupe), and an ID is only ever
// remembered once its message is committed, so a duplicate is never
// answered OK for a message that is not in the log.

// HeaderMsgID is the JSON header key that names a message for dedupe.
const HeaderMsgID = "##msg_id"

// MaxMsgIDLen bounds a producer's message ID, and so what one entry of the
// window holds.
const MaxMsgIDLen = 128

// DedupeConfig is a partition's dedupe setting: Window 0 turns it off.
type DedupeConfig struct {
	Window     time.Duration
	MaxEntries int // committed IDs remembered at most, oldest forgotten first
}

// DefaultDedupeMaxEntries is the per-partition cap when none is set.
const DefaultDedupeMaxEntries = 100_000

// Dedupe is the pure record of the IDs a partition leader wrote within the
// window, and of those on their way into the log.
type Dedupe struct {
	cfg  DedupeConfig
	byID map[string]*dedupeEntry
	// order holds the committed entries, oldest first, from head on:
	// commits come in LogID order and their timestamps grow, so the
	// window's edge and the cap both cut from the front.
	order []*dedupeEntry
	head  int
	seq   uint64 // numbers publishes, to tell an ID repeated in one publish
	hits  int64
}

// dedupeEntry is one ID: pending while its message is queued or in flight,
// then committed with where its message is.
type dedupeEntry struct {
	id      string
	pending bool
	// gone: the map no longer points at it (released, replaced or
	// forgotten), which spares a lookup to find out.
	gone   bool
	owner  uint64 // the publish that holds it while pending
	logID  int64  // the record holding the message
	msgID  uint64
	offset int64
	size   int32
	at     int64 // the message's timestamp, unix nanos
}

// NewDedupe starts an empty window; nil when cfg turns dedupe off.
func NewDedupe(cfg DedupeConfig) *Dedupe {
	if cfg.Window <= 0 {
		return nil
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultDedupeMaxEntries
	}
	return &Dedupe{cfg: cfg, byID: make(map[string]*dedupeEntry)}
}

// Entries is the number of committed IDs remembered.
func (d *Dedupe) Entries() int {
	if d == nil {
		return 0
	}
	return len(d.order) - d.head
}

// Hits is the number of duplicate messages answered without a write.
func (d *Dedupe) Hits() int64 {
	if d == nil {
		return 0
	}
	return d.hits
}

// Config is the setting the window applies.
func (d *Dedupe) Config() DedupeConfig { return d.cfg }

// SetConfig changes the window and the cap; what falls out goes at the
// next commit.
func (d *Dedupe) SetConfig(cfg DedupeConfig) {
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultDedupeMaxEntries
	}
	d.cfg = cfg
}

// Remember records a committed message with an ID: the writer's commits
// and the rebuild from the log both come here, in log order.
func (d *Dedupe) Remember(id string, logID int64, msgID uint64, offset int64, size int32, at int64) {
	old := d.byID[id]
	if old != nil && !old.pending && old.at > at-int64(d.cfg.Window) {
		return // the log holds it twice (written without dedupe): the first answers
	}
	if old != nil {
		old.gone = true
	}
	e := &dedupeEntry{id: id, logID: logID, msgID: msgID, offset: offset, size: size, at: at}
	d.byID[id] = e
	d.push(e)
}

func (d *Dedupe) push(e *dedupeEntry) {
	d.order = append(d.order, e)
	d.prune(e.at)
}

// prune forgets the committed entries older than the window at now and
// those past the cap, oldest first.
func (d *Dedupe) prune(now int64) {
	edge := now - int64(d.cfg.Window)
	for d.head < len(d.order) {
		e := d.order[d.head]
		if e.at > edge && len(d.order)-d.head <= d.cfg.MaxEntries {
			break
		}
		d.forget(e)
		d.order[d.head] = nil
		d.head++
	}
	if d.head > 64 && d.head*2 >= len(d.order) {
		n := copy(d.order, d.order[d.head:])
		clear(d.order[n:])
		d.order, d.head = d.order[:n], 0
	}
}

// forgetFrom drops the committed entries of messages from msgID on: their
// commit did not reach the disk (Writer.Abandon).
func (d *Dedupe) forgetFrom(msgID uint64) {
	for len(d.order) > d.head {
		e := d.order[len(d.order)-1]
		if e.msgID < msgID {
			return
		}
		d.forget(e)
		d.order[len(d.order)-1] = nil
		d.order = d.order[:len(d.order)-1]
	}
}

// forget takes e out of the map, unless another entry replaced it there.
func (d *Dedupe) forget(e *dedupeEntry) {
	if !e.gone {
		delete(d.byID, e.id)
		e.gone = true
	}
}

// verdict is what the window says of a publish.
type verdict int

const (
	fresh   verdict = iota // write it (what is left of it)
	waits                  // an ID of it is on its way in another publish
	answers                // every message of it was written: answer, write nothing
)

// check decides on p at now. A fresh publish comes back with its IDs held
// pending in p.owned, and without the messages that are duplicates;
// an answered one comes with its reply. One look-up per message, and one
// allocation of entries per publish: this is the cost of an ID.
func (d *Dedupe) check(p *Publish, now time.Time) (verdict, Reply) {
	edge := now.UnixNano() - int64(d.cfg.Window)
	d.seq++
	owner := d.seq
	var dup []bool
	var first *dedupeEntry // the first message's entry when it is a duplicate
	var size int32
	var owned []*dedupeEntry
	var entries []dedupeEntry
	hits := int64(0)
	for i, id := range p.IDs {
		if id == "" || i >= len(p.Bodies) {
			continue
		}
		old := d.byID[id]
		switch {
		case old == nil || !old.pending && old.at <= edge:
			if entries == nil {
				entries = make([]dedupeEntry, len(p.Bodies))
				owned = make([]*dedupeEntry, len(p.Bodies))
			}
			if old != nil {
				old.gone = true // past the window: replaced
			}
			e := &entries[i]
			*e = dedupeEntry{id: id, pending: true, owner: owner}
			d.byID[id] = e
			owned[i] = e
		case old.pending && old.owner != owner:
			// On its way in another publish: this one waits for it,
			// holding nothing.
			d.release(owned)
			return waits, Reply{}
		default:
			// Committed within the window, or repeated in this very
			// publish.
			if dup == nil {
				dup = make([]bool, len(p.Bodies))
			}
			dup[i] = true
			hits++
			if !old.pending {
				if i == 0 {
					first = old
				}
				size += old.size
			}
		}
	}
	d.hits += hits
	if dup == nil {
		p.owned = owned
		return fresh, Reply{}
	}
	kept := 0
	for _, isDup := range dup {
		if !isDup {
			kept++
		}
	}
	if kept == 0 {
		r := Reply{Token: p.Token}
		if first != nil {
			r.FirstID, r.MsgID, r.Offset, r.Size = uint64(first.logID), first.msgID, first.offset, size
		}
		return answers, r
	}
	q := *p
	q.Bodies, q.IDs, q.owned = make([][]byte, 0, kept), make([]string, 0, kept), make([]*dedupeEntry, 0, kept)
	q.Headers, q.Traces = nil, nil
	for i := range p.Bodies {
		if dup[i] {
			continue
		}
		q.Bodies = append(q.Bodies, p.Bodies[i])
		q.IDs = append(q.IDs, at0(p.IDs, i))
		q.owned = append(q.owned, owned[i])
		if p.Headers != nil {
			q.Headers = append(q.Headers, at0(p.Headers, i))
		}
		if p.Traces != nil {
			q.Traces = append(q.Traces, at0(p.Traces, i))
		}
	}
	*p = q
	return fresh, Reply{}
}

// at0 is s[i], or the zero value past its end.
func at0[T any](s []T, i int) T {
	var zero T
	if i < len(s) {
		return s[i]
	}
	return zero
}

// release forgets the pending IDs of a publish that will not be written.
func (d *Dedupe) release(owned []*dedupeEntry) {
	for _, e := range owned {
		if e != nil {
			d.forget(e)
		}
	}
}

// committed turns a written message's pending entry into a remembered one.
func (d *Dedupe) committed(e *dedupeEntry, logID int64) {
	if e.gone {
		return
	}
	e.pending, e.logID = false, logID
	d.push(e)
}

// MsgIDOf is the ##msg_id a stored JSON header names, "" for none. The
// common header without one costs a byte search, not a parse.
func MsgIDOf(header []byte) string {
	if len(header) == 0 || !bytes.Contains(header, []byte(HeaderMsgID)) {
		return ""
	}
	var fields struct {
		ID json.RawMessage `json:"##msg_id"`
	}
	if json.Unmarshal(header, &fields) != nil || fields.ID == nil {
		return ""
	}
	var id string
	if json.Unmarshal(fields.ID, &id) != nil || len(id) > MaxMsgIDLen {
		return ""
	}
	return id
}
