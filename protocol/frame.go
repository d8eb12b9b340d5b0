package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// MagicV2 is what a client sends first on a new connection.
const MagicV2 = "  V2"

// Frame types, the second int32 of every server frame.
const (
	FrameTypeResponse int32 = 0
	FrameTypeError    int32 = 1
	FrameTypeMessage  int32 = 2
)

// Bodies of the fixed response frames.
const (
	ResponseOK        = "OK"
	ResponseCloseWait = "CLOSE_WAIT"
	ResponseHeartbeat = "_heartbeat_"
)

// MessageHeaderLength is the timestamp, attempts and ID before a message body.
const MessageHeaderLength = 8 + 2 + MsgIDLength

// frameHeaderLength is the size and type fields; the size counts the type
// but not itself.
const frameHeaderLength = 8

// AppendFrame appends a frame of the given type carrying data to dst.
func AppendFrame(dst []byte, frameType int32, data []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+len(data)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(frameType))
	return append(dst, data...)
}

// WriteFrame writes a frame as two writes, header then data, so it does not
// copy data; w should be buffered.
func WriteFrame(w io.Writer, frameType int32, data []byte) error {
	if len(data) > math.MaxInt32-4 {
		return fmt.Errorf("frame of %d bytes does not fit an int32 size", len(data))
	}
	var hdr [frameHeaderLength]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(4+len(data)))
	binary.BigEndian.PutUint32(hdr[4:], uint32(frameType))
	if _, err := w.Write(hdr[:]); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

// AppendMessageFrame appends a complete message frame: size, type 2, then
// [8 timestamp ns][2 attempts][16 hex ID][body].
func AppendMessageFrame(dst []byte, ts int64, attempts uint16, id uint64, body []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+MessageHeaderLength+len(body)))
	dst = binary.BigEndian.AppendUint32(dst, uint32(FrameTypeMessage))
	dst = binary.BigEndian.AppendUint64(dst, uint64(ts))
	dst = binary.BigEndian.AppendUint16(dst, attempts)
	dst = append(dst, make([]byte, MsgIDLength)...)
	FormatMessageID(dst[len(dst)-MsgIDLength:], id)
	return append(dst, body...)
}

// ReadFrame reads one server frame. It is the client side of the protocol,
// for tests and tools; the server never reads frames.
func ReadFrame(r io.Reader) (frameType int32, data []byte, err error) {
	var hdr [frameHeaderLength]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return 0, nil, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	if size < 4 || size > math.MaxInt32 {
		return 0, nil, fmt.Errorf("invalid frame size %d", size)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return 0, nil, noEOF(err)
	}
	data = make([]byte, size-4)
	if _, err := io.ReadFull(r, data); err != nil {
		return 0, nil, noEOF(err)
	}
	return int32(binary.BigEndian.Uint32(hdr[4:])), data, nil
}

// noEOF turns an EOF inside a frame into the truncation it is.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Message is a decoded message frame.
type Message struct {
	Timestamp int64 // nanoseconds since the Unix epoch, set at publish
	Attempts  uint16
	ID        uint64
	Body      []byte
}

// DecodeMessage decodes the data of a FrameTypeMessage frame. Body aliases data.
func DecodeMessage(data []byte) (Message, error) {
	if len(data) < MessageHeaderLength {
		return Message{}, fmt.Errorf("message of %d bytes is shorter than its %d-byte header", len(data), MessageHeaderLength)
	}
	id, ok := parseHexID(data[10:MessageHeaderLength])
	if !ok {
		return Message{}, fmt.Errorf("message ID %q is not %d hex characters", data[10:MessageHeaderLength], MsgIDLength)
	}
	return Message{
		Timestamp: int64(binary.BigEndian.Uint64(data[:8])),
		Attempts:  binary.BigEndian.Uint16(data[8:10]),
		ID:        id,
		Body:      data[MessageHeaderLength:],
	}, nil
}

// Youzan's extensions of the message frame. youzan/nsq puts two optional
// sections between the ID and the body, in this order:
//
//   - for a consumer that IDENTIFYed with extend_support on an ext topic,
//     the header version (1 byte: 0 none, 4 a JSON header) and, when it is
//     not 0, the header's length (2 bytes) and the header;
//   - for a consumer that subscribed with SUB_ORDERED or SUB_ADVANCED, the
//     message's queue offset (8 bytes) and its size in the log (4 bytes).
//
// youzan's go-nsq reads the first as part of the message and strips the
// second off the body when EnableOrdered or EnableTrace is set.

// Header versions of youzan's ext frames.
const (
	ExtVersionNone byte = 0
	ExtVersionJSON byte = 4
)

// MessageFrame is a message as one consumer's frame lays it out.
type MessageFrame struct {
	Timestamp int64
	Attempts  uint16
	ID        uint64
	// Ext adds the header section; Header is the JSON header, empty for none
	// (a stored header is never empty: publishing refuses one).
	Ext    bool
	Header []byte
	// Detail adds the queue offset and the size in the log.
	Detail  bool
	Offset  int64
	RawSize int32
	Body    []byte
}

// AppendExtendedMessageFrame appends m's frame with the sections it asks for.
// A header is at most 65535 bytes, which publishing enforces.
func AppendExtendedMessageFrame(dst []byte, m *MessageFrame) []byte {
	n := MessageHeaderLength + len(m.Body)
	if m.Ext {
		n++
		if len(m.Header) > 0 {
			n += 2 + len(m.Header)
		}
	}
	if m.Detail {
		n += 8 + 4
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(4+n))
	dst = binary.BigEndian.AppendUint32(dst, uint32(FrameTypeMessage))
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Timestamp))
	dst = binary.BigEndian.AppendUint16(dst, m.Attempts)
	dst = append(dst, make([]byte, MsgIDLength)...)
	FormatMessageID(dst[len(dst)-MsgIDLength:], m.ID)
	if m.Ext {
		if len(m.Header) == 0 {
			dst = append(dst, ExtVersionNone)
		} else {
			dst = append(dst, ExtVersionJSON)
			dst = binary.BigEndian.AppendUint16(dst, uint16(len(m.Header)))
			dst = append(dst, m.Header...)
		}
	}
	if m.Detail {
		dst = binary.BigEndian.AppendUint64(dst, uint64(m.Offset))
		dst = binary.BigEndian.AppendUint32(dst, uint32(m.RawSize))
	}
	return append(dst, m.Body...)
}

// DecodeExtendedMessage decodes a message frame laid out with the sections
// ext and detail say, as youzan's client does. Body and Header alias data.
func DecodeExtendedMessage(data []byte, ext, detail bool) (MessageFrame, error) {
	m, err := DecodeMessage(data)
	if err != nil {
		return MessageFrame{}, err
	}
	f := MessageFrame{Timestamp: m.Timestamp, Attempts: m.Attempts, ID: m.ID, Ext: ext, Detail: detail}
	rest := m.Body
	if ext {
		if len(rest) < 1 {
			return MessageFrame{}, errors.New("message ends before its header version")
		}
		ver := rest[0]
		rest = rest[1:]
		if ver != ExtVersionNone {
			if len(rest) < 2 || len(rest) < 2+int(binary.BigEndian.Uint16(rest)) {
				return MessageFrame{}, errors.New("message ends inside its header")
			}
			n := int(binary.BigEndian.Uint16(rest))
			f.Header = rest[2 : 2+n]
			rest = rest[2+n:]
		}
	}
	if detail {
		if len(rest) < 12 {
			return MessageFrame{}, errors.New("message ends before its offset and size")
		}
		f.Offset = int64(binary.BigEndian.Uint64(rest))
		f.RawSize = int32(binary.BigEndian.Uint32(rest[8:]))
		rest = rest[12:]
	}
	f.Body = rest
	return f, nil
}
