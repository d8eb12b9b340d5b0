package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReadCommand(t *testing.T) {
	tests := []struct {
		in     string
		name   string
		params []string
	}{
		{"NOP\n", "NOP", nil},
		{"PUB test\n", "PUB", []string{"test"}},
		{"SUB topic channel\r\n", "SUB", []string{"topic", "channel"}},
		{"REQ 0123456789abcdef 1000\n", "REQ", []string{"0123456789abcdef", "1000"}},
		{"FIN  x\n", "FIN", []string{"", "x"}},
		{"RDY \n", "RDY", []string{""}},
		{"\n", "", nil},
		{"\r\n", "", nil},
		{"nop\n", "nop", nil},
		{"A\rB\n", "A\rB", nil},
	}
	for _, tt := range tests {
		cmd, err := ReadCommand(bufio.NewReader(strings.NewReader(tt.in)))
		if err != nil {
			t.Errorf("ReadCommand(%q): %v", tt.in, err)
			continue
		}
		if cmd.Name != tt.name {
			t.Errorf("ReadCommand(%q).Name = %q, want %q", tt.in, cmd.Name, tt.name)
		}
		var got []string
		for _, p := range cmd.Params {
			got = append(got, string(p))
		}
		if strings.Join(got, "|") != strings.Join(tt.params, "|") || len(got) != len(tt.params) {
			t.Errorf("ReadCommand(%q).Params = %q, want %q", tt.in, got, tt.params)
		}
	}
}

func TestReadCommandSequence(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("\n\nNOP\n"))
	for _, want := range []string{"", "", "NOP"} {
		cmd, err := ReadCommand(r)
		if err != nil || cmd.Name != want {
			t.Fatalf("ReadCommand = %q, %v; want %q", cmd.Name, err, want)
		}
	}
	if _, err := ReadCommand(r); err != io.EOF {
		t.Fatalf("after last line: err = %v, want io.EOF", err)
	}
}

func TestReadCommandErrors(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"", io.EOF},
		{"NOP", io.ErrUnexpectedEOF},
		{"PUB " + strings.Repeat("t", 40) + "\n", bufio.ErrBufferFull},
	}
	for _, tt := range tests {
		_, err := ReadCommand(bufio.NewReaderSize(strings.NewReader(tt.in), 16))
		if !errors.Is(err, tt.want) {
			t.Errorf("ReadCommand(%q) err = %v, want %v", tt.in, err, tt.want)
		}
		var pe *Error
		if errors.As(err, &pe) {
			t.Errorf("ReadCommand(%q) returned a protocol error %v; a read error sends no frame", tt.in, err)
		}
	}
}

// The parameters must survive the body read that follows on the same reader.
func TestReadCommandParamsOutliveBodyRead(t *testing.T) {
	body := repeat(100)
	in := cat([]byte("PUB mytopic\n"), sized(body))
	r := bufio.NewReaderSize(bytes.NewReader(in), 16)
	cmd, err := ReadCommand(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadMessageBody(r, "PUB", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Errorf("body mismatch")
	}
	if string(cmd.Params[0]) != "mytopic" {
		t.Errorf("topic after body read = %q, want mytopic", cmd.Params[0])
	}
}

func TestReadMessageBody(t *testing.T) {
	tests := []struct {
		name string
		cmd  string
		in   []byte
		want string // error text, "" for success
	}{
		{"ok", "PUB", sized(repeat(100)), ""},
		{"too big", "PUB", sized(repeat(105)), "E_BAD_MESSAGE PUB message too big 105 > 100"},
		{"empty", "PUB", sized(nil), "E_BAD_MESSAGE PUB invalid message body size 0"},
		{"negative", "PUB", rawSize(-1), "E_BAD_MESSAGE PUB invalid message body size -1"},
		{"no size", "PUB", []byte{0, 0}, "E_BAD_MESSAGE PUB failed to read message body size"},
		{"short body", "PUB", cat(rawSize(10), []byte("abc")), "E_BAD_MESSAGE PUB failed to read message body"},
		{"dpub too big", "DPUB", sized(repeat(101)), "E_BAD_MESSAGE DPUB message too big 101 > 100"},
		{"dpub empty", "DPUB", sized(nil), "E_BAD_MESSAGE DPUB invalid message body size 0"},
		{"dpub no size", "DPUB", nil, "E_BAD_MESSAGE DPUB failed to read message body size"},
		{"dpub short", "DPUB", rawSize(5), "E_BAD_MESSAGE DPUB failed to read message body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := ReadMessageBody(bytes.NewReader(tt.in), tt.cmd, 100)
			if tt.want == "" {
				if err != nil || len(body) != 100 {
					t.Fatalf("got %d bytes, %v; want 100 bytes", len(body), err)
				}
				return
			}
			wantProtocolError(t, err, tt.want, true)
		})
	}
}

func TestReadMPUBBody(t *testing.T) {
	hundred := repeat(100)
	tests := []struct {
		name  string
		in    []byte
		want  string
		count int
	}{
		{"ok", mpubBody(hundred, []byte("x"), hundred), "", 3},
		{"body too big", mpubBody(hundred, hundred, hundred, hundred, hundred, hundred,
			hundred, hundred, hundred, hundred, hundred), "E_BAD_BODY MPUB body too big 1148 > 1000", 0},
		{"empty member", mpubBody(hundred, hundred, hundred, hundred, hundred, nil),
			"E_BAD_MESSAGE MPUB invalid message(5) body size 0", 0},
		{"oversized member", mpubBody(hundred, repeat(101)), "E_BAD_MESSAGE MPUB message too big 101 > 100", 0},
		{"no size", nil, "E_BAD_BODY MPUB failed to read body size", 0},
		{"zero size", rawSize(0), "E_BAD_BODY MPUB invalid body size 0", 0},
		{"negative size", rawSize(-7), "E_BAD_BODY MPUB invalid body size -7", 0},
		{"no count", rawSize(8), "E_BAD_BODY MPUB failed to read message count", 0},
		{"zero count", cat(rawSize(8), rawSize(0)), "E_BAD_BODY MPUB invalid message count 0", 0},
		{"negative count", cat(rawSize(8), rawSize(-1)), "E_BAD_BODY MPUB invalid message count -1", 0},
		// (1000-4)/5 = 199 messages at most fit in 1000 bytes.
		{"count over limit", cat(rawSize(8), rawSize(200)), "E_BAD_BODY MPUB invalid message count 200", 0},
		{"missing member size", cat(rawSize(8), rawSize(2), sized([]byte("a"))),
			"E_BAD_MESSAGE MPUB failed to read message(1) body size", 0},
		{"negative member", cat(rawSize(8), rawSize(1), rawSize(-3)),
			"E_BAD_MESSAGE MPUB invalid message(0) body size -3", 0},
		{"short member", cat(rawSize(8), rawSize(1), rawSize(50), []byte("abc")),
			"E_BAD_MESSAGE MPUB failed to read message body", 0},
		// The total claims 100 bytes but ten 100-byte messages follow.
		{"lying total", cat(rawSize(100), rawSize(10), sized(hundred), sized(hundred), sized(hundred),
			sized(hundred), sized(hundred), sized(hundred), sized(hundred), sized(hundred), sized(hundred),
			sized(hundred)), "E_BAD_BODY MPUB body too big 1044 > 1000", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bodies, err := ReadMPUBBody(bytes.NewReader(tt.in), 1000, 100)
			if tt.want == "" {
				if err != nil || len(bodies) != tt.count {
					t.Fatalf("got %d bodies, %v; want %d", len(bodies), err, tt.count)
				}
				if !bytes.Equal(bodies[1], []byte("x")) || !bytes.Equal(bodies[2], hundred) {
					t.Errorf("bodies decoded wrongly")
				}
				return
			}
			wantProtocolError(t, err, tt.want, true)
		})
	}
}

func TestReadIdentifyAndAuthBody(t *testing.T) {
	type reader func(io.Reader, int64) ([]byte, error)
	tests := []struct {
		name string
		read reader
		in   []byte
		want string
	}{
		{"identify ok", ReadIdentifyBody, sized([]byte(`{}`)), ""},
		{"identify too big", ReadIdentifyBody, sized(repeat(11)), "E_BAD_BODY IDENTIFY body too big 11 > 10"},
		{"identify empty", ReadIdentifyBody, sized(nil), "E_BAD_BODY IDENTIFY invalid body size 0"},
		{"identify negative", ReadIdentifyBody, rawSize(-1), "E_BAD_BODY IDENTIFY invalid body size -1"},
		{"identify no size", ReadIdentifyBody, []byte{1}, "E_BAD_BODY IDENTIFY failed to read body size"},
		{"identify short", ReadIdentifyBody, cat(rawSize(5), []byte("{")), "E_BAD_BODY IDENTIFY failed to read body"},
		{"auth ok", ReadAuthBody, sized([]byte("secret")), ""},
		{"auth too big", ReadAuthBody, sized(repeat(20)), "E_BAD_BODY AUTH body too big 20 > 10"},
		{"auth empty", ReadAuthBody, sized(nil), "E_BAD_BODY AUTH invalid body size 0"},
		{"auth no size", ReadAuthBody, nil, "E_BAD_BODY AUTH failed to read body size"},
		{"auth short", ReadAuthBody, rawSize(3), "E_BAD_BODY AUTH failed to read body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := tt.read(bytes.NewReader(tt.in), 10)
			if tt.want == "" {
				if err != nil || !bytes.Equal(sized(body), tt.in) {
					t.Fatalf("got %q, %v", body, err)
				}
				return
			}
			wantProtocolError(t, err, tt.want, true)
		})
	}
}

func params(ps ...string) [][]byte {
	var out [][]byte
	for _, p := range ps {
		out = append(out, []byte(p))
	}
	return out
}

func TestParseRDY(t *testing.T) {
	tests := []struct {
		params [][]byte
		count  int64
		want   string
	}{
		{nil, 1, ""},
		{params("0"), 0, ""},
		{params("50"), 50, ""},
		{params("50", "extra"), 50, ""},
		{params(""), 0, ""}, // nsqd reads an empty count as 0
		{params("51"), 0, "E_INVALID RDY count 51 out of range 0-50"},
		{params("-1"), 0, "E_INVALID RDY could not parse count -1"},
		{params("+1"), 0, "E_INVALID RDY could not parse count +1"},
		{params("1a"), 0, "E_INVALID RDY could not parse count 1a"},
		{params("99999999999999999999"), 0, "E_INVALID RDY could not parse count 99999999999999999999"},
		{params("9223372036854775807"), 0, "E_INVALID RDY count 9223372036854775807 out of range 0-50"},
	}
	for _, tt := range tests {
		count, err := ParseRDY(tt.params, 50)
		if tt.want == "" {
			if err != nil || count != tt.count {
				t.Errorf("ParseRDY(%q) = %d, %v; want %d", tt.params, count, err, tt.count)
			}
			continue
		}
		wantProtocolError(t, err, tt.want, true)
	}
}

func TestParseDeferMS(t *testing.T) {
	tests := []struct {
		param string
		delay time.Duration
		want  string
	}{
		{"0", 0, ""},
		{"1000", time.Second, ""},
		{"3600000", time.Hour, ""},
		{"3600100", 0, "E_INVALID DPUB timeout 3600100 out of range 0-3600000"},
		{"-5", 0, "E_INVALID DPUB could not parse timeout -5"},
		{"1.5", 0, "E_INVALID DPUB could not parse timeout 1.5"},
		{"99999999999999999999", 0, "E_INVALID DPUB could not parse timeout 99999999999999999999"},
	}
	for _, tt := range tests {
		delay, err := ParseDeferMS([]byte(tt.param), time.Hour)
		if tt.want == "" {
			if err != nil || delay != tt.delay {
				t.Errorf("ParseDeferMS(%q) = %v, %v; want %v", tt.param, delay, err, tt.delay)
			}
			continue
		}
		wantProtocolError(t, err, tt.want, true)
	}
}

func TestParseReqTimeout(t *testing.T) {
	tests := []struct {
		param string
		delay time.Duration
		want  string
	}{
		{"0", 0, ""},
		{"1500", 1500 * time.Millisecond, ""},
		{"7200000", 2 * time.Hour, ""}, // no clamping here
		{"9223372036854775807", time.Duration(1<<63 - 1), ""},
		{"-1", 0, "E_INVALID REQ could not parse timeout -1"},
		{"abc", 0, "E_INVALID REQ could not parse timeout abc"},
	}
	for _, tt := range tests {
		delay, err := ParseReqTimeout([]byte(tt.param))
		if tt.want == "" {
			if err != nil || delay != tt.delay {
				t.Errorf("ParseReqTimeout(%q) = %v, %v; want %v", tt.param, delay, err, tt.delay)
			}
			continue
		}
		wantProtocolError(t, err, tt.want, true)
	}
}

func TestMessageID(t *testing.T) {
	tests := []struct {
		param string
		id    uint64
		ok    bool
	}{
		{"0000000000000000", 0, true},
		{"0123456789abcdef", 0x0123456789abcdef, true},
		{"FFFFFFFFFFFFFFFF", 1<<64 - 1, true},
		{"", 0, false},
		{"0123456789abcde", 0, false},
		{"0123456789abcdef0", 0, false},
		{"0123456789abcdeg", 0, false},
		{"-123456789abcdef", 0, false},
	}
	for _, tt := range tests {
		id, err := ParseMessageID([]byte(tt.param))
		if !tt.ok {
			wantProtocolError(t, err, "E_INVALID invalid message ID", true)
			continue
		}
		if err != nil || id != tt.id {
			t.Errorf("ParseMessageID(%q) = %x, %v; want %x", tt.param, id, err, tt.id)
		}
	}

	for _, id := range []uint64{0, 1, 0xdeadbeef, 1<<64 - 1, 0x0123456789abcdef} {
		var buf [MsgIDLength]byte
		FormatMessageID(buf[:], id)
		if got := string(buf[:]); strings.ToLower(got) != got {
			t.Errorf("FormatMessageID(%x) = %q, want lower case", id, got)
		}
		back, err := ParseMessageID(buf[:])
		if err != nil || back != id {
			t.Errorf("round trip of %x: %x, %v", id, back, err)
		}
	}
}
