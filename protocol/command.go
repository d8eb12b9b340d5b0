package protocol

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"time"
)

// Command is one command line from a client: the name, then the
// space-separated parameters. It owns its bytes, so it stays valid while the
// body that follows the line is read from the same reader.
type Command struct {
	Name   string
	Params [][]byte
}

var space = []byte(" ")

// ReadCommand reads one '\n'-terminated command line. A line that does not
// fit in r's buffer comes back as bufio.ErrBufferFull: like nsqd, the caller
// then closes the connection without an error frame.
func ReadCommand(r *bufio.Reader) (Command, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		if err == io.EOF && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return Command{}, err
	}
	line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
	// The line lives in r's buffer until the next read; the body read right
	// after it would overwrite the parameters.
	line = bytes.Clone(line)
	name, rest, hasParams := bytes.Cut(line, space)
	cmd := Command{Name: string(name)}
	if hasParams {
		cmd.Params = bytes.Split(rest, space)
	}
	return cmd, nil
}

func readSize(r io.Reader) (int32, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int32(binary.BigEndian.Uint32(b[:])), nil
}

// ReadMessageBody reads the size-prefixed body of a PUB or DPUB; cmd names
// the command in the error texts.
func ReadMessageBody(r io.Reader, cmd string, maxMsgSize int64) ([]byte, error) {
	size, err := readSize(r)
	if err != nil {
		return nil, Fatal(E_BAD_MESSAGE, "%s failed to read message body size", cmd)
	}
	if size <= 0 {
		return nil, Fatal(E_BAD_MESSAGE, "%s invalid message body size %d", cmd, size)
	}
	if int64(size) > maxMsgSize {
		return nil, Fatal(E_BAD_MESSAGE, "%s message too big %d > %d", cmd, size, maxMsgSize)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, Fatal(E_BAD_MESSAGE, "%s failed to read message body", cmd)
	}
	return body, nil
}

// ReadMPUBBody reads an MPUB body: total size, message count, then each
// message as size and bytes.
func ReadMPUBBody(r io.Reader, maxBodySize, maxMsgSize int64) ([][]byte, error) {
	total, err := readSize(r)
	if err != nil {
		return nil, Fatal(E_BAD_BODY, "MPUB failed to read body size")
	}
	if total <= 0 {
		return nil, Fatal(E_BAD_BODY, "MPUB invalid body size %d", total)
	}
	if int64(total) > maxBodySize {
		return nil, Fatal(E_BAD_BODY, "MPUB body too big %d > %d", total, maxBodySize)
	}
	count, err := readSize(r)
	if err != nil {
		return nil, Fatal(E_BAD_BODY, "MPUB failed to read message count")
	}
	// Each message takes at least 5 bytes (size + one body byte) after the
	// 4-byte count, which bounds the count a legal body can hold.
	if count <= 0 || int64(count) > (maxBodySize-4)/5 {
		return nil, Fatal(E_BAD_BODY, "MPUB invalid message count %d", count)
	}
	// Like nsqd, the declared total is not matched against the messages.
	// Unlike nsqd, the messages may not add up to more than maxBodySize, so
	// a lying total cannot make the server buffer count*maxMsgSize bytes.
	bodies := make([][]byte, 0, min(count, 64))
	read := int64(4)
	for i := range count {
		size, err := readSize(r)
		if err != nil {
			return nil, Fatal(E_BAD_MESSAGE, "MPUB failed to read message(%d) body size", i)
		}
		if size <= 0 {
			return nil, Fatal(E_BAD_MESSAGE, "MPUB invalid message(%d) body size %d", i, size)
		}
		if int64(size) > maxMsgSize {
			return nil, Fatal(E_BAD_MESSAGE, "MPUB message too big %d > %d", size, maxMsgSize)
		}
		read += 4 + int64(size)
		if read > maxBodySize {
			return nil, Fatal(E_BAD_BODY, "MPUB body too big %d > %d", read, maxBodySize)
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, Fatal(E_BAD_MESSAGE, "MPUB failed to read message body")
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// ReadIdentifyBody reads the size-prefixed JSON body of an IDENTIFY.
func ReadIdentifyBody(r io.Reader, maxBodySize int64) ([]byte, error) {
	return readBody(r, "IDENTIFY", maxBodySize)
}

// ReadAuthBody reads the size-prefixed secret of an AUTH.
func ReadAuthBody(r io.Reader, maxBodySize int64) ([]byte, error) {
	return readBody(r, "AUTH", maxBodySize)
}

// readBody checks "too big" before "invalid size", the reverse of the
// message readers, because that is the order nsqd uses here.
func readBody(r io.Reader, cmd string, maxBodySize int64) ([]byte, error) {
	size, err := readSize(r)
	if err != nil {
		return nil, Fatal(E_BAD_BODY, "%s failed to read body size", cmd)
	}
	if int64(size) > maxBodySize {
		return nil, Fatal(E_BAD_BODY, "%s body too big %d > %d", cmd, size, maxBodySize)
	}
	if size <= 0 {
		return nil, Fatal(E_BAD_BODY, "%s invalid body size %d", cmd, size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, Fatal(E_BAD_BODY, "%s failed to read body", cmd)
	}
	return body, nil
}

// parseDecimal accepts only ASCII digits: no sign, no spaces. As in nsqd an
// empty string is 0. Values beyond int64 are refused.
func parseDecimal(b []byte) (int64, bool) {
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// ParseRDY returns the count of "RDY [count]"; params are the command's
// parameters. A missing count means 1.
func ParseRDY(params [][]byte, maxRdy int64) (int64, error) {
	count := int64(1)
	if len(params) > 0 {
		n, ok := parseDecimal(params[0])
		if !ok {
			return 0, Fatal(E_INVALID, "RDY could not parse count %s", params[0])
		}
		count = n
	}
	if count > maxRdy {
		return 0, Fatal(E_INVALID, "RDY count %d out of range 0-%d", count, maxRdy)
	}
	return count, nil
}

// ParseDeferMS returns the delay of "DPUB <topic> <defer_ms>"; unlike REQ, a
// delay beyond maxReqTimeout is an error.
func ParseDeferMS(param []byte, maxReqTimeout time.Duration) (time.Duration, error) {
	ms, ok := parseDecimal(param)
	if !ok {
		return 0, Fatal(E_INVALID, "DPUB could not parse timeout %s", param)
	}
	maxMS := int64(maxReqTimeout / time.Millisecond)
	if ms > maxMS {
		return 0, Fatal(E_INVALID, "DPUB timeout %d out of range 0-%d", ms, maxMS)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// ParseReqTimeout returns the delay of "REQ <id> <timeout_ms>". It does not
// clamp: nsqd clamps to --max-req-timeout without telling the client, and
// that is the caller's job. Delays too large for a time.Duration saturate.
func ParseReqTimeout(param []byte) (time.Duration, error) {
	ms, ok := parseDecimal(param)
	if !ok {
		return 0, Fatal(E_INVALID, "REQ could not parse timeout %s", param)
	}
	if ms > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}
