package topic

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"time"
)

// Idempotent publishing (docs/replication.md#dedupe-window). A producer
// names a message with a ##msg_id of its own; within the topic's dedupe
// window, a publish of an ID this partition already wrote is answered as
// the first was and not written again. The window is the leader's memory
// of the IDs in its committed log tail: commits add to it, a new leader
// rebuilds it from its log (actor's rebuildDedupe), and an ID is only ever
// answered for once its message is committed, so a duplicate is never
// answered OK for a message that is not in the log.

// HeaderMsgID is the JSON header key that names a message for dedupe.
const HeaderMsgID = "##msg_id"

// The header keys a dead letter names its origin with (broker's dead
// letters). A ##msg_id in a header naming an origin channel is told apart
// by its origin (ScopedMsgID).
const (
	HeaderOriginTopic     = "##origin_topic"
	HeaderOriginPartition = "##origin_partition"
	HeaderOriginChannel   = "##origin_channel"
)

// ScopedMsgID is the ID the dedupe window knows a message by, given the
// ##msg_id id of its header's fields: id itself, or for a dead letter id
// with its origin topic, partition and channel as the header holds them.
// A message dead on two channels has a dead letter for each; one
// dead-lettered twice by the same channel is written once.
func ScopedMsgID(id string, fields map[string]json.RawMessage) string {
	if fields[HeaderOriginChannel] == nil {
		return id
	}
	b := []byte(id)
	for _, k := range []string{HeaderOriginTopic, HeaderOriginPartition, HeaderOriginChannel} {
		b = append(append(b, 0), fields[k]...)
	}
	return string(b)
}

// MaxMsgIDLen bounds a producer's message ID, and so what one entry of the
// window holds.
const MaxMsgIDLen = 128

// DedupeConfig is a partition's dedupe setting: Window 0 turns it off.
type DedupeConfig struct {
	Window time.Duration
	// MaxEntries is how many IDs are remembered at most, oldest
	// forgotten first; fixed for the life of a window.
	MaxEntries int
}

// DefaultDedupeMaxEntries is the per-partition cap when none is set.
const DefaultDedupeMaxEntries = 100_000

// Dedupe is the pure record of the IDs a partition leader wrote within the
// window, and of those on their way into the log.
//
// Entries live by value in a ring, in the order publishes took them
// (which is the log's order but for a publish that waited on another),
// each numbered by a sequence; an index of their IDs' hashes (idindex.go)
// finds them, and a candidate is checked against the ring entry's whole
// hash and ID. A message ID thus costs one probe of the index when
// offered, its ring slot when written and committed, and one probe when
// it leaves the ring: no allocation per ID, and nothing for the garbage
// collector to follow but the ring's IDs. An ID is never taken for
// another.
type Dedupe struct {
	cfg   DedupeConfig
	seed  maphash.Seed
	index idIndex
	ring  []dedupeEntry // entry seq at ring[seq % MaxEntries]
	// oldest and next bound the sequences in the ring.
	oldest, next uint64
	committed    int // committed entries in the ring
	hits         int64
	// hashes is check's scratch; touched keeps its early loads.
	hashes  []uint64
	touched uint64
}

// dedupeRef names a ring entry: its sequence + 1, 0 for none.
type dedupeRef uint64

// dedupeEntry is one ID: pending while its message is queued or in
// flight, then committed with where its message is; released when that
// message will not be written.
type dedupeEntry struct {
	id     string
	hash   uint64
	seq    uint64
	msgID  uint64 // the message's ID, which also stands for its record
	offset int64
	at     int64 // the message's timestamp, unix nanos
	size   int32
	state  entryState
}

type entryState uint8

const (
	pendingEntry entryState = iota
	committedEntry
	releasedEntry
)

// NewDedupe starts an empty window; nil when cfg turns dedupe off.
func NewDedupe(cfg DedupeConfig) *Dedupe {
	if cfg.Window <= 0 {
		return nil
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = DefaultDedupeMaxEntries
	}
	return &Dedupe{cfg: cfg, seed: maphash.MakeSeed(), index: newIDIndex(cfg.MaxEntries)}
}

// Entries is the number of committed IDs remembered.
func (d *Dedupe) Entries() int {
	if d == nil {
		return 0
	}
	return d.committed
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

// SetWindow changes the window; what falls out goes at the next commit.
func (d *Dedupe) SetWindow(window time.Duration) { d.cfg.Window = window }

// entry is the ring entry ref names, nil once it left the ring.
func (d *Dedupe) entry(ref dedupeRef) *dedupeEntry {
	if ref == 0 {
		return nil
	}
	seq := uint64(ref) - 1
	if seq < d.oldest || seq >= d.next {
		return nil
	}
	return &d.ring[seq%uint64(d.cfg.MaxEntries)]
}

// find is the newest entry for id that is not released, or nil; h is
// id's hash.
func (d *Dedupe) find(id string, h uint64) *dedupeEntry {
	var found *dedupeEntry
	d.index.each(h, func(ring int) {
		e := &d.ring[ring]
		if e.hash == h && e.id == id && e.state != releasedEntry && (found == nil || e.seq > found.seq) {
			found = e
		}
	})
	return found
}

// add puts a new entry for id at the ring's end, forgetting the oldest
// when the ring is full: a pending one forgotten is only not recognised.
func (d *Dedupe) add(id string, h uint64, state entryState) *dedupeEntry {
	if d.next-d.oldest == uint64(d.cfg.MaxEntries) {
		d.evictOldest()
	}
	seq := d.next
	d.next++
	e := dedupeEntry{id: id, hash: h, seq: seq, state: state}
	i := seq % uint64(d.cfg.MaxEntries)
	if i == uint64(len(d.ring)) {
		d.ring = append(d.ring, e)
	} else {
		d.ring[i] = e
	}
	d.index.insert(h, int(i))
	return &d.ring[i]
}

// evictOldest takes the oldest entry out of the ring.
func (d *Dedupe) evictOldest() {
	i := d.oldest % uint64(d.cfg.MaxEntries)
	e := &d.ring[i]
	d.index.remove(e.hash, int(i))
	if e.state == committedEntry {
		d.committed--
	}
	*e = dedupeEntry{}
	d.oldest++
}

// Remember records a committed message with an ID, read from the log when
// the window is rebuilt, in log order.
func (d *Dedupe) Remember(id string, msgID uint64, offset int64, size int32, at int64) {
	h := maphash.String(d.seed, id)
	if old := d.find(id, h); old != nil && old.state == committedEntry && old.at > at-int64(d.cfg.Window) {
		return // the log holds it twice (written without dedupe): the first answers
	}
	e := d.add(id, h, committedEntry)
	e.msgID, e.offset, e.size, e.at = msgID, offset, size, at
	d.committed++
	d.prune(at)
}

// prune forgets the committed entries at the ring's start that are older
// than the window at now, and released ones there.
func (d *Dedupe) prune(now int64) {
	edge := now - int64(d.cfg.Window)
	for d.oldest < d.next {
		e := &d.ring[d.oldest%uint64(d.cfg.MaxEntries)]
		if e.state == pendingEntry || e.state == committedEntry && e.at > edge {
			return
		}
		d.evictOldest()
	}
}

// forgetFrom forgets the committed entries of messages from msgID on:
// their commit did not reach the disk (Writer.Abandon). Rare, so it looks
// at the whole ring.
func (d *Dedupe) forgetFrom(msgID uint64) {
	for seq := d.oldest; seq < d.next; seq++ {
		e := &d.ring[seq%uint64(d.cfg.MaxEntries)]
		if e.state == committedEntry && e.msgID >= msgID {
			e.state = releasedEntry
			d.committed--
		}
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
// an answered one comes with its reply.
func (d *Dedupe) check(p *Publish, now time.Time) (verdict, Reply) {
	edge := now.UnixNano() - int64(d.cfg.Window)
	mine := d.next // entries from here on are this publish's
	var dup []bool
	var first *dedupeEntry // the first message's entry when it is a duplicate
	var size int32
	var owned []dedupeRef
	hits := int64(0)
	hashes := d.prefetch(p.IDs)
	for i, id := range p.IDs {
		if id == "" || i >= len(p.Bodies) {
			continue
		}
		h := hashes[i]
		old := d.find(id, h)
		switch {
		case old == nil || old.state == committedEntry && old.at <= edge:
			if owned == nil {
				owned = make([]dedupeRef, len(p.Bodies))
			}
			owned[i] = dedupeRef(d.add(id, h, pendingEntry).seq + 1)
		case old.state == pendingEntry && old.seq < mine:
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
			if old.state == committedEntry {
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
			r.FirstID, r.MsgID, r.Offset, r.Size = first.msgID, first.msgID, first.offset, size
		}
		return answers, r
	}
	q := *p
	q.Bodies, q.IDs, q.owned = make([][]byte, 0, kept), make([]string, 0, kept), make([]dedupeRef, 0, kept)
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

// prefetch hashes ids and reads, ahead of the look-ups, the index slots
// they and the entries they may push out of the ring start at: loads
// that depend on nothing are in flight together, where the look-ups one
// after the other would each wait for memory in turn. On a window of
// 100,000 IDs the index is larger than the processor's caches, and this
// is most of the cost of an ID.
func (d *Dedupe) prefetch(ids []string) []uint64 {
	d.hashes = d.hashes[:0]
	var sum uint64
	for _, id := range ids {
		h := maphash.String(d.seed, id)
		d.hashes = append(d.hashes, h)
		sum += d.index.slots[h&d.index.mask]
	}
	full := uint64(d.cfg.MaxEntries)
	for seq := d.oldest; seq < d.oldest+uint64(len(ids)) && seq < d.next && d.next-d.oldest+uint64(len(ids)) > full; seq++ {
		sum += d.index.slots[d.ring[seq%full].hash&d.index.mask]
	}
	d.touched += sum
	return d.hashes
}

// release forgets the pending IDs of a publish that will not be written.
func (d *Dedupe) release(owned []dedupeRef) {
	for _, ref := range owned {
		if e := d.entry(ref); e != nil && e.state == pendingEntry {
			e.state = releasedEntry
		}
	}
}

// written records where a pending ID's message went in a write.
func (d *Dedupe) written(ref dedupeRef, msgID uint64, offset int64, size int32, at int64) {
	if e := d.entry(ref); e != nil && e.state == pendingEntry {
		e.msgID, e.offset, e.size, e.at = msgID, offset, size, at
	}
}

// commit remembers the written IDs of a committed record, and forgets
// what the window left behind.
func (d *Dedupe) commit(refs []dedupeRef) {
	var newest int64
	for _, ref := range refs {
		if e := d.entry(ref); e != nil && e.state == pendingEntry {
			e.state = committedEntry
			d.committed++
			newest = max(newest, e.at)
		}
	}
	if newest != 0 {
		d.prune(newest)
	}
}

// at0 is s[i], or the zero value past its end.
func at0[T any](s []T, i int) T {
	var zero T
	if i < len(s) {
		return s[i]
	}
	return zero
}

// MsgIDOf is the ##msg_id a stored JSON header names, "" for none. The
// common header without one costs a byte search, not a parse.
func MsgIDOf(header []byte) string {
	if len(header) == 0 || !bytes.Contains(header, []byte(HeaderMsgID)) {
		return ""
	}
	// A map, not a struct: a struct field takes a key that differs in
	// case too, and the ID must be the one the publish was checked under.
	var fields map[string]json.RawMessage
	if json.Unmarshal(header, &fields) != nil || fields[HeaderMsgID] == nil {
		return ""
	}
	var id string
	if json.Unmarshal(fields[HeaderMsgID], &id) != nil || id == "" || len(id) > MaxMsgIDLen {
		return ""
	}
	return ScopedMsgID(id, fields)
}
