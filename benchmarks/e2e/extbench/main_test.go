package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
)

// A batch is youzan's MPUB_EXT: the command line, the size of what
// follows, the message count, and each message sized, with its 2-byte
// header length, its header naming it, and its body.
func TestAppendBatchLaysOutMPUBExt(t *testing.T) {
	cfg := config{topic: "idem", partition: 2, idKey: "##msg_id", batch: 3}
	seq := 0
	b := appendBatch(nil, cfg, "7", &seq, []byte("body"))
	line, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || string(line) != "MPUB_EXT idem 2" {
		t.Fatalf("command line %q", line)
	}
	if size := binary.BigEndian.Uint32(rest); int(size) != len(rest)-4 {
		t.Fatalf("size %d, %d bytes follow", size, len(rest)-4)
	}
	if n := binary.BigEndian.Uint32(rest[4:]); n != 3 {
		t.Fatalf("%d messages", n)
	}
	rest = rest[8:]
	for i := range 3 {
		size := binary.BigEndian.Uint32(rest)
		msg := rest[4 : 4+size]
		rest = rest[4+size:]
		hl := binary.BigEndian.Uint16(msg)
		var h map[string]string
		if err := json.Unmarshal(msg[2:2+hl], &h); err != nil {
			t.Fatal(err)
		}
		if want := "7-" + string(rune('1'+i)); h["##msg_id"] != want || string(msg[2+hl:]) != "body" {
			t.Fatalf("message %d: header %v body %q, want ID %s", i, h, msg[2+hl:], want)
		}
	}
	if len(rest) != 0 || seq != 3 {
		t.Fatalf("%d bytes left, sequence at %d", len(rest), seq)
	}
}
