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
