package storage

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestMessageRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		msg  Message
	}{
		{"empty body", Message{ID: 1, Timestamp: 5}},
		{"body", Message{ID: 0x0123456789abcdef, Timestamp: 1700000000123456789, Body: []byte("hello")}},
		{"deferred", Message{ID: 42, Timestamp: 7, DeliverAt: 1700000060e9, Body: []byte("later")}},
		{"max id", Message{ID: math.MaxUint64, Timestamp: -1, Body: bytes.Repeat([]byte{0}, 1000)}},
		{"traced", Message{ID: 3, Timestamp: 8, TraceID: 0xfeedbeef, Body: []byte("t")}},
		{"channel delayed", Message{ID: 4, Timestamp: 9, DeliverAt: 1700000060e9, DelayedChannel: "ch", DelayedOrigID: 2, DelayedAttempts: 3, Body: []byte("d")}},
		{"header", Message{ID: 6, Timestamp: 10, Header: []byte(`{"k":"v"}`), Body: []byte("h")}},
		{"largest header", Message{ID: 7, Timestamp: 11, Header: bytes.Repeat([]byte("h"), MaxHeaderSize), Body: []byte("h")}},
		{"all extensions", Message{ID: 5, Timestamp: 9, DeliverAt: 1, TraceID: 7, DelayedChannel: strings.Repeat("c", 64), DelayedOrigID: 6, DelayedAttempts: 65535, Header: []byte(`{}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendMessage([]byte("prefix"), &tt.msg)
			b = b[len("prefix"):]
			if len(b) != EncodedSize(&tt.msg) {
				t.Fatalf("encoded %d bytes, EncodedSize says %d", len(b), EncodedSize(&tt.msg))
			}
			got, n, err := DecodeMessage(append(b, "trailing"...))
			if err != nil {
				t.Fatal(err)
			}
			if n != len(b) {
				t.Fatalf("decoded size %d, want %d", n, len(b))
			}
			want := tt.msg
			if len(got.Body) == 0 && len(want.Body) == 0 {
				got.Body, want.Body = nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, want %+v", got, tt.msg)
			}
		})
	}
}

func TestMessageLayout(t *testing.T) {
	m := Message{ID: 0xabc, Timestamp: 0x0102030405060708, DeliverAt: 9, Body: []byte("xy")}
	b := AppendMessage(nil, &m)
	want := []byte{0, 0, 0, 36, 1, 2, 3, 4, 5, 6, 7, 8, 0x80, 0}
	want = append(want, "0000000000000abc"...)
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 9, 'x', 'y')
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%v\nwant\n%v", b, want)
	}
}

// A header follows the other extensions after its 2-byte length.
func TestMessageHeaderLayout(t *testing.T) {
	m := Message{ID: 0xabc, Timestamp: 0x0102030405060708, TraceID: 9, Header: []byte(`{}`), Body: []byte("xy")}
	b := AppendMessage(nil, &m)
	want := []byte{0, 0, 0, 26 + 8 + 2 + 2 + 2, 1, 2, 3, 4, 5, 6, 7, 8, 0x50, 0}
	want = append(want, "0000000000000abc"...)
	want = append(want, 0, 0, 0, 0, 0, 0, 0, 9, 0, 2, '{', '}', 'x', 'y')
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded\n%v\nwant\n%v", b, want)
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	valid := AppendMessage(nil, &Message{ID: 1, Body: []byte("abc")})
	mutate := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), valid...)) }
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short prefix", []byte{0, 0}},
		{"size below header", []byte{0, 0, 0, 25}},
		{"size beyond data", valid[:len(valid)-1]},
		{"unknown flags", mutate(func(b []byte) []byte { b[13] = 1; return b })},
		{"id not hex", mutate(func(b []byte) []byte { b[20] = 'g'; return b })},
		{"deferred without time", mutate(func(b []byte) []byte { b[12] = 0x80; return b })},
		{"traced without ID", mutate(func(b []byte) []byte { b[12] = 0x40; return b })},
		{"channel delayed without fields", mutate(func(b []byte) []byte { b[12] = 0x20; return b })},
		{"channel delayed without name", func() []byte {
			b := AppendMessage(nil, &Message{ID: 1, DelayedChannel: "c", Body: []byte("abcdefghijkl")})
			b[4+26+10] = 0
			return b
		}()},
		{"header without its length", func() []byte {
			b := AppendMessage(nil, &Message{ID: 1, Body: []byte("a")})
			b[12] = 0x10
			return b
		}()},
		{"header longer than the record", mutate(func(b []byte) []byte { b[12] = 0x10; b[4+26] = 0xff; return b })},
		{"empty header", mutate(func(b []byte) []byte { b[12] = 0x10; b[4+26], b[4+26+1] = 0, 0; return b })},
		{"zeros", make([]byte, 64)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := DecodeMessage(tt.b); !errors.Is(err, ErrCorruptMessage) {
				t.Fatalf("err = %v, want ErrCorruptMessage", err)
			}
		})
	}
}

func TestMessageID(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{"0000000000000000", 0, false},
		{"0123456789abcdef", 0x0123456789abcdef, false},
		{"0123456789ABCDEF", 0x0123456789abcdef, false},
		{"ffffffffffffffff", math.MaxUint64, false},
		{"FfFfFfFfFfFfFfFf", math.MaxUint64, false},
		{"", 0, true},
		{"0123456789abcde", 0, true},
		{"0123456789abcdef0", 0, true},
		{"0123456789abcdeg", 0, true},
		{"-123456789abcdef", 0, true},
		{" 123456789abcdef", 0, true},
	}
	for _, tt := range tests {
		got, err := DecodeID([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("DecodeID(%q) = %#x, %v; want %#x, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if tt.wantErr {
			continue
		}
		var enc [16]byte
		EncodeID(enc[:], tt.want)
		if string(enc[:]) != strings.ToLower(tt.in) {
			t.Errorf("EncodeID(%#x) = %q, want %q", tt.want, enc[:], strings.ToLower(tt.in))
		}
	}
}
