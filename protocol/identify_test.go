package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testLimits are the limits nsqd's own tests run with where they assert
// IDENTIFY texts.
func testLimits() Limits {
	lim := DefaultLimits()
	lim.MaxHeartbeatInterval = 300 * time.Second
	lim.MaxOutputBufferSize = 512 * 1024
	lim.MaxOutputBufferTimeout = time.Second
	return lim
}

func TestNegotiateIdentifyErrors(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{`{"heartbeat_interval":300001}`, "E_BAD_BODY IDENTIFY heartbeat interval (300001) is invalid"},
		{`{"heartbeat_interval":999}`, "E_BAD_BODY IDENTIFY heartbeat interval (999) is invalid"},
		{`{"heartbeat_interval":-2}`, "E_BAD_BODY IDENTIFY heartbeat interval (-2) is invalid"},
		{`{"output_buffer_size":524289}`, "E_BAD_BODY IDENTIFY output buffer size (524289) is invalid"},
		{`{"output_buffer_size":63}`, "E_BAD_BODY IDENTIFY output buffer size (63) is invalid"},
		{`{"output_buffer_timeout":1001}`, "E_BAD_BODY IDENTIFY output buffer timeout (1001) is invalid"},
		{`{"output_buffer_timeout":24}`, "E_BAD_BODY IDENTIFY output buffer timeout (24) is invalid"},
		{`{"sample_rate":100}`, "E_BAD_BODY IDENTIFY sample rate (100) is invalid"},
		{`{"sample_rate":-1}`, "E_BAD_BODY IDENTIFY sample rate (-1) is invalid"},
		{`{"msg_timeout":999}`, "E_BAD_BODY IDENTIFY msg timeout (999) is invalid"},
		{`{"msg_timeout":900001}`, "E_BAD_BODY IDENTIFY msg timeout (900001) is invalid"},
		{`{"msg_timeout":-1}`, "E_BAD_BODY IDENTIFY msg timeout (-1) is invalid"},
		// nsqd checks the timeout before the size, and the heartbeat first.
		{`{"output_buffer_size":1,"output_buffer_timeout":1}`, "E_BAD_BODY IDENTIFY output buffer timeout (1) is invalid"},
		{`{"msg_timeout":1,"heartbeat_interval":1}`, "E_BAD_BODY IDENTIFY heartbeat interval (1) is invalid"},
		{`{"feature_negotiation":true,"snappy":true,"deflate":true}`,
			"E_IDENTIFY_FAILED cannot enable both deflate and snappy compression"},
		{`not json`, "E_BAD_BODY IDENTIFY failed to decode JSON body"},
		{`[]`, "E_BAD_BODY IDENTIFY failed to decode JSON body"},
		{`{"heartbeat_interval":"1000"}`, "E_BAD_BODY IDENTIFY failed to decode JSON body"},
		{`{"sample_rate":3000000000}`, "E_BAD_BODY IDENTIFY failed to decode JSON body"},
		{`{} {}`, "E_BAD_BODY IDENTIFY failed to decode JSON body"},
	}
	for _, tt := range tests {
		_, err := NegotiateIdentify([]byte(tt.body), testLimits())
		wantProtocolError(t, err, tt.want, true)
	}
}

func TestNegotiateIdentifyValues(t *testing.T) {
	lim := testLimits()
	lim.TLSAvailable = true
	tests := []struct {
		body string
		want Negotiated // Request and Response are not compared
	}{
		{`{}`, Negotiated{HeartbeatInterval: 30 * time.Second, OutputBufferSize: 16384,
			OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute}},
		{`null`, Negotiated{HeartbeatInterval: 30 * time.Second, OutputBufferSize: 16384,
			OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute}},
		{`{"heartbeat_interval":-1,"output_buffer_size":-1,"output_buffer_timeout":500,"msg_timeout":1000,"sample_rate":42}`,
			Negotiated{OutputBufferSize: 1, MsgTimeout: time.Second, SampleRate: 42}},
		{`{"heartbeat_interval":300000,"output_buffer_size":524288,"output_buffer_timeout":-1,"msg_timeout":900000}`,
			Negotiated{HeartbeatInterval: 300 * time.Second, OutputBufferSize: 524288, MsgTimeout: 15 * time.Minute}},
		{`{"heartbeat_interval":1000,"output_buffer_size":64,"output_buffer_timeout":25,"sample_rate":99}`,
			Negotiated{HeartbeatInterval: time.Second, OutputBufferSize: 64, OutputBufferTimeout: 25 * time.Millisecond,
				MsgTimeout: time.Minute, SampleRate: 99}},
		// Upgrades are granted only with feature negotiation.
		{`{"tls_v1":true,"snappy":true,"deflate":true}`, Negotiated{HeartbeatInterval: 30 * time.Second,
			OutputBufferSize: 16384, OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute}},
		{`{"feature_negotiation":true,"tls_v1":true,"snappy":true}`, Negotiated{HeartbeatInterval: 30 * time.Second,
			OutputBufferSize: 16384, OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute,
			TLS: true, Snappy: true, DeflateLevel: 6}},
		{`{"feature_negotiation":true,"deflate":true,"deflate_level":9}`, Negotiated{HeartbeatInterval: 30 * time.Second,
			OutputBufferSize: 16384, OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute,
			Deflate: true, DeflateLevel: 6}},
		{`{"feature_negotiation":true,"deflate":true,"deflate_level":3}`, Negotiated{HeartbeatInterval: 30 * time.Second,
			OutputBufferSize: 16384, OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute,
			Deflate: true, DeflateLevel: 3}},
		{`{"feature_negotiation":true,"deflate":true,"deflate_level":-4}`, Negotiated{HeartbeatInterval: 30 * time.Second,
			OutputBufferSize: 16384, OutputBufferTimeout: 250 * time.Millisecond, MsgTimeout: time.Minute,
			Deflate: true, DeflateLevel: 6}},
	}
	for _, tt := range tests {
		got, err := NegotiateIdentify([]byte(tt.body), lim)
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		got.Request, got.Response = IdentifyRequest{}, nil
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got  %+v\n want %+v", tt.body, got, tt.want)
		}
	}
}

func TestNegotiateIdentifyServerRefusals(t *testing.T) {
	lim := DefaultLimits()
	lim.Snappy, lim.Deflate = false, false
	body := []byte(`{"feature_negotiation":true,"tls_v1":true,"snappy":true,"deflate":true}`)
	n, err := NegotiateIdentify(body, lim)
	if err != nil {
		t.Fatal(err)
	}
	if n.TLS || n.Snappy || n.Deflate {
		t.Errorf("granted tls=%v snappy=%v deflate=%v on a server offering none", n.TLS, n.Snappy, n.Deflate)
	}

	lim = DefaultLimits()
	lim.Snappy = false
	n, err = NegotiateIdentify(body, lim)
	if err != nil || n.Snappy || !n.Deflate {
		t.Errorf("snappy off, both asked: snappy=%v deflate=%v err=%v", n.Snappy, n.Deflate, err)
	}
}

func TestNegotiateIdentifyPlainOK(t *testing.T) {
	n, err := NegotiateIdentify([]byte(`{"client_id":"x","hostname":"h","user_agent":"go-nsq/1.1.0","short_id":"s","long_id":"l"}`), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if string(n.Response) != "OK" {
		t.Errorf("Response = %q, want OK", n.Response)
	}
	if n.Request.ClientID != "x" || n.Request.Hostname != "h" || n.Request.UserAgent != "go-nsq/1.1.0" {
		t.Errorf("Request = %+v", n.Request)
	}
}

func TestIdentifyResponseJSON(t *testing.T) {
	lim := DefaultLimits()
	lim.AuthRequired = true
	lim.TopologyRegion, lim.TopologyZone = "eu", "eu-1a"
	body := `{"feature_negotiation":true,"msg_timeout":5000,"output_buffer_size":2048,"output_buffer_timeout":100,"sample_rate":7,"deflate":true,"deflate_level":2}`
	n, err := NegotiateIdentify([]byte(body), lim)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"max_rdy_count":2500,"version":"1.3.0","max_msg_timeout":900000,"msg_timeout":5000,` +
		`"tls_v1":false,"deflate":true,"deflate_level":2,"max_deflate_level":6,"snappy":false,` +
		`"sample_rate":7,"auth_required":true,"output_buffer_size":2048,"output_buffer_timeout":100,` +
		`"topology_region":"eu","topology_zone":"eu-1a"}`
	if string(n.Response) != want {
		t.Errorf("Response =\n%s\nwant\n%s", n.Response, want)
	}

	// The key order on its own, read token by token.
	dec := json.NewDecoder(bytes.NewReader(n.Response))
	var keys []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	wantKeys := "max_rdy_count version max_msg_timeout msg_timeout tls_v1 deflate deflate_level " +
		"max_deflate_level snappy sample_rate auth_required output_buffer_size output_buffer_timeout " +
		"topology_region topology_zone"
	if got := strings.Join(keys, " "); got != wantKeys {
		t.Errorf("keys = %s\nwant   %s", got, wantKeys)
	}
}
