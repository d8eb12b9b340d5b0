package protocol

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// sized prefixes b with its length as a big-endian int32.
func sized(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

// rawSize is a bare big-endian int32, for sizes that lie about what follows.
func rawSize(n int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(n))
}

// mpubBody builds an MPUB body (total size, count, sized messages).
func mpubBody(bodies ...[]byte) []byte {
	inner := binary.BigEndian.AppendUint32(nil, uint32(len(bodies)))
	for _, b := range bodies {
		inner = append(inner, sized(b)...)
	}
	return sized(inner)
}

func repeat(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	return b
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// wantProtocolError fails unless err is an *Error with exactly this text
// and fatality.
func wantProtocolError(t *testing.T, err error, text string, fatal bool) {
	t.Helper()
	var pe *Error
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v (%T), want *Error %q", err, err, text)
	}
	if pe.Error() != text {
		t.Errorf("error text = %q, want %q", pe.Error(), text)
	}
	if pe.Fatal != fatal {
		t.Errorf("%q: Fatal = %v, want %v", text, pe.Fatal, fatal)
	}
}

// bufio16k is the reader a session reads commands with.
func bufio16k(r io.Reader) *bufio.Reader {
	return bufio.NewReaderSize(r, 16*1024)
}
