package protocol

import (
	"bytes"
	"errors"
	"io"
	"testing"

	nsq "github.com/nsqio/go-nsq"
)

func TestAppendFrame(t *testing.T) {
	tests := []struct {
		frameType int32
		data      string
		want      []byte
	}{
		{FrameTypeResponse, "OK", []byte{0, 0, 0, 6, 0, 0, 0, 0, 'O', 'K'}},
		{FrameTypeError, "E_INVALID x", append([]byte{0, 0, 0, 15, 0, 0, 0, 1}, "E_INVALID x"...)},
		{FrameTypeResponse, "", []byte{0, 0, 0, 4, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		got := AppendFrame([]byte("prefix"), tt.frameType, []byte(tt.data))
		if !bytes.Equal(got, append([]byte("prefix"), tt.want...)) {
			t.Errorf("AppendFrame(%d, %q) = %v, want prefix+%v", tt.frameType, tt.data, got, tt.want)
		}
		var buf bytes.Buffer
		if err := WriteFrame(&buf, tt.frameType, []byte(tt.data)); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), tt.want) {
			t.Errorf("WriteFrame(%d, %q) = %v, want %v", tt.frameType, tt.data, buf.Bytes(), tt.want)
		}
	}
}

func TestAppendMessageFrameLayout(t *testing.T) {
	got := AppendMessageFrame(nil, 0x0102030405060708, 0x0a0b, 0x0123456789abcdef, []byte("hi"))
	want := cat(
		[]byte{0, 0, 0, 4 + 26 + 2}, // size
		[]byte{0, 0, 0, 2},          // message frame
		[]byte{1, 2, 3, 4, 5, 6, 7, 8},
		[]byte{0x0a, 0x0b},
		[]byte("0123456789abcdef"),
		[]byte("hi"),
	)
	if !bytes.Equal(got, want) {
		t.Fatalf("AppendMessageFrame =\n%v\nwant\n%v", got, want)
	}
}

// go-nsq must read what we write: that is the compatibility that matters.
func TestMessageFrameDecodesInGoNSQ(t *testing.T) {
	var stream []byte
	stream = AppendFrame(stream, FrameTypeResponse, []byte(ResponseHeartbeat))
	stream = AppendMessageFrame(stream, 1700000000123456789, 3, 0xfedcba9876543210, []byte("body"))
	stream = AppendFrame(stream, FrameTypeError, []byte("E_INVALID invalid message ID"))
	r := bytes.NewReader(stream)

	ft, data, err := nsq.ReadUnpackedResponse(r)
	if err != nil || ft != nsq.FrameTypeResponse || string(data) != ResponseHeartbeat {
		t.Fatalf("heartbeat frame: %d %q %v", ft, data, err)
	}
	ft, data, err = nsq.ReadUnpackedResponse(r)
	if err != nil || ft != nsq.FrameTypeMessage {
		t.Fatalf("message frame: %d %v", ft, err)
	}
	msg, err := nsq.DecodeMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.ID[:]) != "fedcba9876543210" || msg.Attempts != 3 ||
		msg.Timestamp != 1700000000123456789 || string(msg.Body) != "body" {
		t.Errorf("go-nsq decoded id=%q attempts=%d ts=%d body=%q", msg.ID[:], msg.Attempts, msg.Timestamp, msg.Body)
	}
	ft, data, err = nsq.ReadUnpackedResponse(r)
	if err != nil || ft != nsq.FrameTypeError || string(data) != "E_INVALID invalid message ID" {
		t.Fatalf("error frame: %d %q %v", ft, data, err)
	}
}

func TestReadFrameAndDecodeMessage(t *testing.T) {
	stream := AppendMessageFrame(nil, 42, 1, 7, []byte("payload"))
	ft, data, err := ReadFrame(bytes.NewReader(stream))
	if err != nil || ft != FrameTypeMessage {
		t.Fatalf("ReadFrame: %d, %v", ft, err)
	}
	msg, err := DecodeMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Timestamp != 42 || msg.Attempts != 1 || msg.ID != 7 || string(msg.Body) != "payload" {
		t.Errorf("DecodeMessage = %+v", msg)
	}

	if _, err := DecodeMessage(data[:25]); err == nil {
		t.Error("DecodeMessage of a 25-byte message succeeded")
	}
	bad := bytes.Clone(data)
	bad[12] = 'z'
	if _, err := DecodeMessage(bad); err == nil {
		t.Error("DecodeMessage with a non-hex ID succeeded")
	}
}

func TestReadFrameErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		want error // nil: any non-nil error
	}{
		{"empty", nil, io.EOF},
		{"size too small", []byte{0, 0, 0, 3, 0, 0, 0}, nil},
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff}, nil},
		{"truncated type", []byte{0, 0, 0, 6, 0}, io.ErrUnexpectedEOF},
		{"truncated data", []byte{0, 0, 0, 6, 0, 0, 0, 0, 'O'}, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		_, _, err := ReadFrame(bytes.NewReader(tt.in))
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// Commands encoded by go-nsq must parse with ReadCommand and the body readers.
func TestGoNSQCommandsParse(t *testing.T) {
	var buf bytes.Buffer
	ident, err := nsq.Identify(map[string]any{"client_id": "c", "feature_negotiation": true, "short_id": "x"})
	if err != nil {
		t.Fatal(err)
	}
	mpub, err := nsq.MultiPublish("t", [][]byte{[]byte("one"), []byte("two")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*nsq.Command{
		ident,
		nsq.Publish("t", []byte("hello")),
		nsq.DeferredPublish("t", 1500e6, []byte("later")),
		mpub,
		nsq.Subscribe("t", "c#ephemeral"),
		nsq.Ready(10),
		nsq.Finish(nsq.MessageID([]byte("0123456789abcdef"))),
		nsq.Requeue(nsq.MessageID([]byte("0123456789abcdef")), 2500e6),
		nsq.Touch(nsq.MessageID([]byte("0123456789abcdef"))),
		nsq.StartClose(),
		nsq.Nop(),
	} {
		if _, err := c.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
	}

	r := bufio16k(&buf)
	lim := DefaultLimits()
	next := func(want string) Command {
		t.Helper()
		cmd, err := ReadCommand(r)
		if err != nil || cmd.Name != want {
			t.Fatalf("ReadCommand = %q, %v; want %s", cmd.Name, err, want)
		}
		return cmd
	}

	next("IDENTIFY")
	body, err := ReadIdentifyBody(r, lim.MaxBodySize)
	if err != nil {
		t.Fatal(err)
	}
	neg, err := NegotiateIdentify(body, lim)
	if err != nil || neg.Request.ClientID != "c" || !neg.Request.FeatureNegotiation {
		t.Fatalf("NegotiateIdentify: %+v, %v", neg.Request, err)
	}

	if cmd := next("PUB"); string(cmd.Params[0]) != "t" {
		t.Errorf("PUB topic %q", cmd.Params[0])
	}
	if b, err := ReadMessageBody(r, "PUB", lim.MaxMsgSize); err != nil || string(b) != "hello" {
		t.Fatalf("PUB body %q, %v", b, err)
	}

	cmd := next("DPUB")
	if d, err := ParseDeferMS(cmd.Params[1], lim.MaxReqTimeout); err != nil || d != 1500e6 {
		t.Fatalf("DPUB delay %v, %v", d, err)
	}
	if b, err := ReadMessageBody(r, "DPUB", lim.MaxMsgSize); err != nil || string(b) != "later" {
		t.Fatalf("DPUB body %q, %v", b, err)
	}

	next("MPUB")
	bodies, err := ReadMPUBBody(r, lim.MaxBodySize, lim.MaxMsgSize)
	if err != nil || len(bodies) != 2 || string(bodies[0]) != "one" || string(bodies[1]) != "two" {
		t.Fatalf("MPUB bodies %q, %v", bodies, err)
	}

	if cmd := next("SUB"); !IsValidTopicName(string(cmd.Params[0])) || !IsEphemeral(string(cmd.Params[1])) {
		t.Errorf("SUB params %q", cmd.Params)
	}
	if n, err := ParseRDY(next("RDY").Params, lim.MaxRdyCount); err != nil || n != 10 {
		t.Errorf("RDY = %d, %v", n, err)
	}
	if id, err := ParseMessageID(next("FIN").Params[0]); err != nil || id != 0x0123456789abcdef {
		t.Errorf("FIN id %x, %v", id, err)
	}
	cmd = next("REQ")
	if d, err := ParseReqTimeout(cmd.Params[1]); err != nil || d != 2500e6 {
		t.Errorf("REQ timeout %v, %v", d, err)
	}
	next("TOUCH")
	next("CLS")
	next("NOP")
	if _, err := ReadCommand(r); err != io.EOF {
		t.Errorf("trailing data: %v", err)
	}
}
