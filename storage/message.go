// Package storage is the durable state of one topic partition: the segment
// log of NSQ-encoded messages, the commit log of 48-byte records that says how
// much of it is committed, the recovery that reconciles the two on start, and
// the channel state files. It starts no goroutines: the partition actor is the
// only writer, and channel actors read committed ranges concurrently.
package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MessageHeaderSize is the fixed part of an encoded message after its 4-byte
// length prefix: timestamp (8), flags (2) and the hex ID (16), as in nsqd.
const MessageHeaderSize = 26

// Flags say which extensions follow a message's header, in flag order.
// nsqd's attempts field carries them on disk because attempts live in the
// channel, not in the log.
const (
	// FlagDeferred: 8 bytes of DeliverAt (DPUB, or a REQ moved to the
	// delayed queue).
	FlagDeferred uint16 = 0x8000
	// FlagTraced: 8 bytes of TraceID (PUB_TRACE, MPUB_TRACE).
	FlagTraced uint16 = 0x4000
	// FlagChannelDelayed: a copy of a message one channel REQ'd with a long
	// delay: 8 bytes of the original ID, 2 of its attempts, then the
	// channel's name after a 1-byte length. Only that channel delivers it.
	FlagChannelDelayed uint16 = 0x2000
	// FlagHeader: the message's JSON header (youzan's PUB_EXT), after a
	// 2-byte length. Only ext topics store one.
	FlagHeader uint16 = 0x1000

	knownFlags = FlagDeferred | FlagTraced | FlagChannelDelayed | FlagHeader
)

// MaxHeaderSize is the largest header a message may carry, youzan's limit:
// its frames give the header a 2-byte length.
const MaxHeaderSize = 65534

const (
	sizePrefix = 4
	idSize     = 16
	deferSize  = 8
	traceSize  = 8
	// delayedFixed is the channel-delayed extension before the name.
	delayedFixed  = 8 + 2 + 1
	headerLenSize = 2
	// minRecordSize is the smallest valid record including its prefix.
	minRecordSize = sizePrefix + MessageHeaderSize
)

// ErrCorruptMessage is wrapped by every error about bytes that do not decode
// as a message record.
var ErrCorruptMessage = errors.New("corrupt message record")

// Message is one message as stored in the log.
type Message struct {
	ID        uint64
	Timestamp int64 // unix nanoseconds
	DeliverAt int64 // unix nanoseconds; 0 = deliver now
	TraceID   uint64
	// DelayedChannel, when set, makes this a channel-delayed copy: only
	// that channel delivers it; the others confirm it unread.
	DelayedChannel  string
	DelayedOrigID   uint64
	DelayedAttempts uint16
	// Header is the message's JSON header; empty for none. At most
	// MaxHeaderSize bytes.
	Header []byte
	Body   []byte
}

func (m *Message) flags() uint16 {
	var f uint16
	if m.DeliverAt != 0 {
		f |= FlagDeferred
	}
	if m.TraceID != 0 {
		f |= FlagTraced
	}
	if m.DelayedChannel != "" {
		f |= FlagChannelDelayed
	}
	if len(m.Header) > 0 {
		f |= FlagHeader
	}
	return f
}

// StoredMessage is a message read back from the log with its position.
type StoredMessage struct {
	Offset int64 // virtual byte offset of the record's length prefix
	Size   int32 // including the 4-byte prefix
	Message
}

// EncodedSize is the number of bytes AppendMessage adds, prefix included.
func EncodedSize(m *Message) int {
	n := minRecordSize + len(m.Body)
	if m.DeliverAt != 0 {
		n += deferSize
	}
	if m.TraceID != 0 {
		n += traceSize
	}
	if m.DelayedChannel != "" {
		n += delayedFixed + len(m.DelayedChannel)
	}
	if len(m.Header) > 0 {
		n += headerLenSize + len(m.Header)
	}
	return n
}

// AppendMessage appends the on-disk record of m to dst. A DelayedChannel
// longer than 255 bytes cannot be encoded; channel names are at most 64.
func AppendMessage(dst []byte, m *Message) []byte {
	size := EncodedSize(m)
	flags := m.flags()
	dst = binary.BigEndian.AppendUint32(dst, uint32(size-sizePrefix))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Timestamp))
	dst = binary.BigEndian.AppendUint16(dst, flags)
	var id [idSize]byte
	EncodeID(id[:], m.ID)
	dst = append(dst, id[:]...)
	if flags&FlagDeferred != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(m.DeliverAt))
	}
	if flags&FlagTraced != 0 {
		dst = binary.BigEndian.AppendUint64(dst, m.TraceID)
	}
	if flags&FlagChannelDelayed != 0 {
		dst = binary.BigEndian.AppendUint64(dst, m.DelayedOrigID)
		dst = binary.BigEndian.AppendUint16(dst, m.DelayedAttempts)
		dst = append(dst, byte(len(m.DelayedChannel)))
		dst = append(dst, m.DelayedChannel...)
	}
	if flags&FlagHeader != 0 {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Header)))
		dst = append(dst, m.Header...)
	}
	return append(dst, m.Body...)
}

// DecodeMessage decodes the record at the start of b. The body and header
// alias b.
// n is the record size including its prefix.
func DecodeMessage(b []byte) (m Message, n int, err error) {
	if len(b) < sizePrefix {
		return m, 0, fmt.Errorf("%w: %d bytes, need a 4-byte size", ErrCorruptMessage, len(b))
	}
	size := int64(binary.BigEndian.Uint32(b))
	if size < MessageHeaderSize {
		return m, 0, fmt.Errorf("%w: size %d below header size %d", ErrCorruptMessage, size, MessageHeaderSize)
	}
	if size > int64(len(b)-sizePrefix) {
		return m, 0, fmt.Errorf("%w: size %d but only %d bytes", ErrCorruptMessage, size, len(b)-sizePrefix)
	}
	rec := b[sizePrefix : sizePrefix+size]
	m.Timestamp = int64(binary.BigEndian.Uint64(rec))
	flags := binary.BigEndian.Uint16(rec[8:])
	if flags&^knownFlags != 0 {
		return m, 0, fmt.Errorf("%w: unknown flags %#04x", ErrCorruptMessage, flags)
	}
	if m.ID, err = DecodeID(rec[10 : 10+idSize]); err != nil {
		return m, 0, fmt.Errorf("%w: %v", ErrCorruptMessage, err)
	}
	body := rec[MessageHeaderSize:]
	if flags&FlagDeferred != 0 {
		if len(body) < deferSize {
			return m, 0, fmt.Errorf("%w: deferred flag without deliver time", ErrCorruptMessage)
		}
		m.DeliverAt = int64(binary.BigEndian.Uint64(body))
		if m.DeliverAt == 0 {
			return m, 0, fmt.Errorf("%w: deferred flag with zero deliver time", ErrCorruptMessage)
		}
		body = body[deferSize:]
	}
	if flags&FlagTraced != 0 {
		if len(body) < traceSize {
			return m, 0, fmt.Errorf("%w: traced flag without trace ID", ErrCorruptMessage)
		}
		m.TraceID = binary.BigEndian.Uint64(body)
		body = body[traceSize:]
	}
	if flags&FlagChannelDelayed != 0 {
		if len(body) < delayedFixed || len(body) < delayedFixed+int(body[delayedFixed-1]) {
			return m, 0, fmt.Errorf("%w: channel-delayed flag without its fields", ErrCorruptMessage)
		}
		n := int(body[delayedFixed-1])
		if n == 0 {
			return m, 0, fmt.Errorf("%w: channel-delayed flag with no channel", ErrCorruptMessage)
		}
		m.DelayedOrigID = binary.BigEndian.Uint64(body)
		m.DelayedAttempts = binary.BigEndian.Uint16(body[8:])
		m.DelayedChannel = string(body[delayedFixed : delayedFixed+n])
		body = body[delayedFixed+n:]
	}
	if flags&FlagHeader != 0 {
		if len(body) < headerLenSize || len(body) < headerLenSize+int(binary.BigEndian.Uint16(body)) {
			return m, 0, fmt.Errorf("%w: header flag without its header", ErrCorruptMessage)
		}
		n := int(binary.BigEndian.Uint16(body))
		if n == 0 {
			return m, 0, fmt.Errorf("%w: header flag with an empty header", ErrCorruptMessage)
		}
		m.Header = body[headerLenSize : headerLenSize+n]
		body = body[headerLenSize+n:]
	}
	m.Body = body
	return m, int(sizePrefix + size), nil
}

const hexDigits = "0123456789abcdef"

// EncodeID writes id as 16 lowercase hex bytes into dst[:16].
func EncodeID(dst []byte, id uint64) {
	_ = dst[idSize-1]
	for i := idSize - 1; i >= 0; i-- {
		dst[i] = hexDigits[id&0xf]
		id >>= 4
	}
}

// DecodeID parses exactly 16 hex characters, either case.
func DecodeID(b []byte) (uint64, error) {
	if len(b) != idSize {
		return 0, fmt.Errorf("message ID must be %d hex characters, got %d bytes", idSize, len(b))
	}
	var id uint64
	for _, c := range b {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, fmt.Errorf("message ID %q is not hex", b)
		}
		id = id<<4 | uint64(v)
	}
	return id, nil
}
