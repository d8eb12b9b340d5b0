package protocol

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"io"
	"testing"

	"github.com/golang/snappy"
	nsq "github.com/nsqio/go-nsq"
)

// duplex is one side of a connection made of two one-way buffers.
type duplex struct {
	io.Reader
	io.Writer
}

// upgradeCase describes both ends of one compression upgrade; the client
// ends are built the way go-nsq builds them.
type upgradeCase struct {
	name     string
	identify string
	server   func(io.ReadWriter) (io.Reader, FlushWriter, error)
	client   func(toClient, toServer io.ReadWriter) (io.Reader, io.Writer, func() error)
	granted  func(nsq.IdentifyResponse) bool
}

func TestCompressionUpgradeWithGoNSQClient(t *testing.T) {
	cases := []upgradeCase{
		{
			name:     "snappy",
			identify: `{"feature_negotiation":true,"snappy":true}`,
			server: func(c io.ReadWriter) (io.Reader, FlushWriter, error) {
				r, w := UpgradeSnappy(c)
				return r, w, nil
			},
			client: func(toClient, toServer io.ReadWriter) (io.Reader, io.Writer, func() error) {
				return snappy.NewReader(toClient), snappy.NewWriter(toServer), func() error { return nil }
			},
			granted: func(r nsq.IdentifyResponse) bool { return r.Snappy && !r.Deflate },
		},
		{
			name:     "deflate",
			identify: `{"feature_negotiation":true,"deflate":true,"deflate_level":5}`,
			server: func(c io.ReadWriter) (io.Reader, FlushWriter, error) {
				return UpgradeDeflate(c, 5)
			},
			client: func(toClient, toServer io.ReadWriter) (io.Reader, io.Writer, func() error) {
				fw, _ := flate.NewWriter(toServer, 5)
				return flate.NewReader(toClient), fw, fw.Flush
			},
			granted: func(r nsq.IdentifyResponse) bool { return r.Deflate && !r.Snappy },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { testUpgrade(t, tc) })
	}
}

func testUpgrade(t *testing.T, tc upgradeCase) {
	var toClient, toServer bytes.Buffer
	body := repeat(128000)

	// Server: the IDENTIFY answer goes out plain, then the stream switches
	// and the first compressed frame is OK.
	neg, err := NegotiateIdentify([]byte(tc.identify), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(&toClient, FrameTypeResponse, neg.Response); err != nil {
		t.Fatal(err)
	}
	sr, sw, err := tc.server(duplex{&toServer, &toClient})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFrame(sw, FrameTypeResponse, []byte(ResponseOK)); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Write(AppendMessageFrame(nil, 1234, 1, 0xabc, body)); err != nil {
		t.Fatal(err)
	}
	if err := sw.Flush(); err != nil {
		t.Fatal(err)
	}

	// Client, as go-nsq does it.
	ft, data, err := nsq.ReadUnpackedResponse(&toClient)
	if err != nil || ft != nsq.FrameTypeResponse {
		t.Fatalf("IDENTIFY response: %d, %v", ft, err)
	}
	var resp nsq.IdentifyResponse
	if err := json.Unmarshal(data, &resp); err != nil || !tc.granted(resp) {
		t.Fatalf("IDENTIFY response %s, %v", data, err)
	}
	cr, cw, flush := tc.client(&toClient, &toServer)
	ft, data, err = nsq.ReadUnpackedResponse(cr)
	if err != nil || ft != nsq.FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("upgrade OK frame: %d %q %v", ft, data, err)
	}
	ft, data, err = nsq.ReadUnpackedResponse(cr)
	if err != nil || ft != nsq.FrameTypeMessage {
		t.Fatalf("message frame: %d %v", ft, err)
	}
	msg, err := nsq.DecodeMessage(data)
	if err != nil || !bytes.Equal(msg.Body, body) || string(msg.ID[:]) != "0000000000000abc" {
		t.Fatalf("message: id %q, %d-byte body, %v", msg.ID[:], len(msg.Body), err)
	}
	if _, err := nsq.Publish("t", body).WriteTo(cw); err != nil {
		t.Fatal(err)
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}

	// Server reads the compressed PUB.
	r := bufio16k(sr)
	cmd, err := ReadCommand(r)
	if err != nil || cmd.Name != "PUB" {
		t.Fatalf("ReadCommand = %q, %v", cmd.Name, err)
	}
	got, err := ReadMessageBody(r, "PUB", DefaultLimits().MaxMsgSize)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("PUB body: %d bytes, %v", len(got), err)
	}
}

// Without Flush the client must see nothing: that is why the session has to
// flush after each response.
func TestSnappyWriterHoldsUntilFlush(t *testing.T) {
	var out bytes.Buffer
	_, w := UpgradeSnappy(duplex{&bytes.Buffer{}, &out})
	if err := WriteFrame(w, FrameTypeResponse, []byte(ResponseOK)); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("%d bytes written before Flush", out.Len())
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ft, data, err := ReadFrame(snappy.NewReader(&out))
	if err != nil || ft != FrameTypeResponse || string(data) != "OK" {
		t.Fatalf("after Flush: %d %q %v", ft, data, err)
	}
}

func TestUpgradeDeflateBadLevel(t *testing.T) {
	for _, level := range []int{-3, 10} {
		if _, _, err := UpgradeDeflate(duplex{&bytes.Buffer{}, &bytes.Buffer{}}, level); err == nil {
			t.Errorf("UpgradeDeflate(level %d) succeeded", level)
		}
	}
}
