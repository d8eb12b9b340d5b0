package protocol

import (
	"compress/flate"
	"encoding/json"
	"time"

	"github.com/partitamq/partita/actors/channel"
)

// Output buffer sizes a client may choose; the maximum is a server limit.
const (
	DefaultOutputBufferSize = 16 * 1024
	MinOutputBufferSize     = 64
)

const defaultDeflateLevel = 6

// IdentifyRequest is the JSON body of IDENTIFY. Durations are milliseconds;
// 0 means "server default" and -1 "disabled" where the field allows it.
// Unknown keys (go-nsq sends short_id and long_id) are ignored.
type IdentifyRequest struct {
	ClientID            string `json:"client_id"`
	Hostname            string `json:"hostname"`
	UserAgent           string `json:"user_agent"`
	FeatureNegotiation  bool   `json:"feature_negotiation"`
	HeartbeatInterval   int64  `json:"heartbeat_interval"`
	OutputBufferSize    int64  `json:"output_buffer_size"`
	OutputBufferTimeout int64  `json:"output_buffer_timeout"`
	TLSv1               bool   `json:"tls_v1"`
	Snappy              bool   `json:"snappy"`
	Deflate             bool   `json:"deflate"`
	DeflateLevel        int    `json:"deflate_level"`
	SampleRate          int32  `json:"sample_rate"`
	MsgTimeout          int64  `json:"msg_timeout"`
	TopologyRegion      string `json:"topology_region"`
	TopologyZone        string `json:"topology_zone"`
	// youzan's: the client reads message headers on ext topics, takes
	// only messages of its tag there, and only those its filter matches.
	ExtendSupport bool               `json:"extend_support"`
	DesiredTag    string             `json:"desired_tag"`
	ExtFilter     channel.FilterSpec `json:"ext_filter"`
}

// MaxTagLength is youzan's limit on a desired tag.
const MaxTagLength = 100

// Limits are the server settings that bound what a client may negotiate and
// that the IDENTIFY response reports.
type Limits struct {
	MaxBodySize int64
	MaxMsgSize  int64
	MaxRdyCount int64

	MsgTimeout    time.Duration
	MaxMsgTimeout time.Duration
	MaxReqTimeout time.Duration

	// ClientTimeout/2 is the default heartbeat interval.
	ClientTimeout        time.Duration
	MaxHeartbeatInterval time.Duration

	OutputBufferTimeout    time.Duration
	MinOutputBufferTimeout time.Duration
	MaxOutputBufferTimeout time.Duration
	MaxOutputBufferSize    int64

	// FINReadDelay is how long a consumer connection's reader may wait
	// after a FIN for more to gather (finreads.go); 0 reads at once.
	FINReadDelay time.Duration

	MaxDeflateLevel int
	Snappy          bool
	Deflate         bool
	TLSAvailable    bool
	AuthRequired    bool

	Version string
	// This server's own topology, reported to clients that negotiate.
	TopologyRegion string
	TopologyZone   string
}

// DefaultLimits returns nsqd's defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxBodySize:            5 * 1024 * 1024,
		MaxMsgSize:             1024 * 1024,
		MaxRdyCount:            2500,
		MsgTimeout:             60 * time.Second,
		MaxMsgTimeout:          15 * time.Minute,
		MaxReqTimeout:          time.Hour,
		ClientTimeout:          60 * time.Second,
		MaxHeartbeatInterval:   60 * time.Second,
		OutputBufferTimeout:    250 * time.Millisecond,
		MinOutputBufferTimeout: 25 * time.Millisecond,
		MaxOutputBufferTimeout: 30 * time.Second,
		MaxOutputBufferSize:    64 * 1024,
		FINReadDelay:           time.Millisecond,
		MaxDeflateLevel:        6,
		Snappy:                 true,
		Deflate:                true,
		Version:                "1.3.0",
	}
}

// Negotiated is the outcome of one IDENTIFY.
type Negotiated struct {
	Request IdentifyRequest

	// HeartbeatInterval is 0 when the client disabled heartbeats; such a
	// client may not SUB.
	HeartbeatInterval time.Duration
	// OutputBufferSize is 1 when the client asked for no buffering, as in
	// nsqd: every write then goes straight to the connection.
	OutputBufferSize int64
	// OutputBufferTimeout is 0 when timed flushes are off.
	OutputBufferTimeout time.Duration
	SampleRate          int32
	MsgTimeout          time.Duration
	// Filter is the compiled ext_filter, nil for none.
	Filter *channel.Filter

	// Upgrades to perform after sending Response, in this order: TLS, then
	// Snappy or Deflate. Each is followed by an OK frame on the new stream.
	TLS          bool
	Snappy       bool
	Deflate      bool
	DeflateLevel int

	// Response is the body of the response frame: OK, or the JSON document
	// when the client asked for feature negotiation.
	Response []byte
}

// identifyResponse fixes the key order of the JSON reply to nsqd's.
type identifyResponse struct {
	MaxRdyCount         int64  `json:"max_rdy_count"`
	Version             string `json:"version"`
	MaxMsgTimeout       int64  `json:"max_msg_timeout"`
	MsgTimeout          int64  `json:"msg_timeout"`
	TLSv1               bool   `json:"tls_v1"`
	Deflate             bool   `json:"deflate"`
	DeflateLevel        int    `json:"deflate_level"`
	MaxDeflateLevel     int    `json:"max_deflate_level"`
	Snappy              bool   `json:"snappy"`
	SampleRate          int32  `json:"sample_rate"`
	AuthRequired        bool   `json:"auth_required"`
	OutputBufferSize    int64  `json:"output_buffer_size"`
	OutputBufferTimeout int64  `json:"output_buffer_timeout"`
	TopologyRegion      string `json:"topology_region"`
	TopologyZone        string `json:"topology_zone"`
}

// NegotiateIdentify validates an IDENTIFY body against lim and works out the
// connection's settings, checking fields in nsqd's order so that the first
// error reported is the one nsqd would report. A 0 field takes lim's
// default, not the value of an earlier IDENTIFY on the same connection.
func NegotiateIdentify(body []byte, lim Limits) (Negotiated, error) {
	var req IdentifyRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Negotiated{}, Fatal(E_BAD_BODY, "IDENTIFY failed to decode JSON body")
	}
	n := Negotiated{
		Request:             req,
		HeartbeatInterval:   lim.ClientTimeout / 2,
		OutputBufferSize:    DefaultOutputBufferSize,
		OutputBufferTimeout: lim.OutputBufferTimeout,
		MsgTimeout:          lim.MsgTimeout,
	}
	if err := negotiateHeartbeat(&n, req, lim); err != nil {
		return Negotiated{}, err
	}
	if err := negotiateOutputBuffer(&n, req, lim); err != nil {
		return Negotiated{}, err
	}
	if err := negotiateSampleRate(&n, req); err != nil {
		return Negotiated{}, err
	}
	if err := negotiateMsgTimeout(&n, req, lim); err != nil {
		return Negotiated{}, err
	}
	if len(req.DesiredTag) > MaxTagLength {
		return Negotiated{}, Fatal(E_BAD_BODY, "IDENTIFY desired_tag of %d bytes is above %d", len(req.DesiredTag), MaxTagLength)
	}
	// youzan ignores a filter it cannot compile and delivers everything;
	// refusing it says what is wrong instead.
	f, err := channel.NewFilter(req.ExtFilter)
	if err != nil {
		return Negotiated{}, Fatal(E_BAD_BODY, "IDENTIFY %s", err)
	}
	n.Filter = f

	if !req.FeatureNegotiation {
		n.Response = []byte(ResponseOK)
		return n, nil
	}
	n.TLS = lim.TLSAvailable && req.TLSv1
	n.Snappy = lim.Snappy && req.Snappy
	n.Deflate = lim.Deflate && req.Deflate
	n.DeflateLevel = negotiateDeflateLevel(n.Deflate, req.DeflateLevel, lim.MaxDeflateLevel)
	if n.Snappy && n.Deflate {
		return Negotiated{}, Fatal(E_IDENTIFY_FAILED, "cannot enable both deflate and snappy compression")
	}
	resp, err := json.Marshal(identifyResponse{
		MaxRdyCount:         lim.MaxRdyCount,
		Version:             lim.Version,
		MaxMsgTimeout:       lim.MaxMsgTimeout.Milliseconds(),
		MsgTimeout:          n.MsgTimeout.Milliseconds(),
		TLSv1:               n.TLS,
		Deflate:             n.Deflate,
		DeflateLevel:        n.DeflateLevel,
		MaxDeflateLevel:     lim.MaxDeflateLevel,
		Snappy:              n.Snappy,
		SampleRate:          n.SampleRate,
		AuthRequired:        lim.AuthRequired,
		OutputBufferSize:    n.OutputBufferSize,
		OutputBufferTimeout: n.OutputBufferTimeout.Milliseconds(),
		TopologyRegion:      lim.TopologyRegion,
		TopologyZone:        lim.TopologyZone,
	})
	if err != nil {
		return Negotiated{}, Fatal(E_IDENTIFY_FAILED, "IDENTIFY failed %s", err)
	}
	n.Response = resp
	return n, nil
}

func negotiateHeartbeat(n *Negotiated, req IdentifyRequest, lim Limits) error {
	ms := req.HeartbeatInterval
	switch {
	case ms == -1:
		n.HeartbeatInterval = 0
	case ms == 0:
	case ms >= 1000 && ms <= lim.MaxHeartbeatInterval.Milliseconds():
		n.HeartbeatInterval = time.Duration(ms) * time.Millisecond
	default:
		return Fatal(E_BAD_BODY, "IDENTIFY heartbeat interval (%d) is invalid", ms)
	}
	return nil
}

// negotiateOutputBuffer checks the timeout before the size, as nsqd does,
// and an unbuffered connection has no use for a flush timer.
func negotiateOutputBuffer(n *Negotiated, req IdentifyRequest, lim Limits) error {
	ms := req.OutputBufferTimeout
	switch {
	case ms == -1:
		n.OutputBufferTimeout = 0
	case ms == 0:
	case ms >= lim.MinOutputBufferTimeout.Milliseconds() && ms <= lim.MaxOutputBufferTimeout.Milliseconds():
		n.OutputBufferTimeout = time.Duration(ms) * time.Millisecond
	default:
		return Fatal(E_BAD_BODY, "IDENTIFY output buffer timeout (%d) is invalid", ms)
	}
	size := req.OutputBufferSize
	switch {
	case size == -1:
		n.OutputBufferSize = 1
		n.OutputBufferTimeout = 0
	case size == 0:
	case size >= MinOutputBufferSize && size <= lim.MaxOutputBufferSize:
		n.OutputBufferSize = size
	default:
		return Fatal(E_BAD_BODY, "IDENTIFY output buffer size (%d) is invalid", size)
	}
	return nil
}

func negotiateSampleRate(n *Negotiated, req IdentifyRequest) error {
	if req.SampleRate < 0 || req.SampleRate > 99 {
		return Fatal(E_BAD_BODY, "IDENTIFY sample rate (%d) is invalid", req.SampleRate)
	}
	n.SampleRate = req.SampleRate
	return nil
}

func negotiateMsgTimeout(n *Negotiated, req IdentifyRequest, lim Limits) error {
	ms := req.MsgTimeout
	switch {
	case ms == 0:
	case ms >= 1000 && ms <= lim.MaxMsgTimeout.Milliseconds():
		n.MsgTimeout = time.Duration(ms) * time.Millisecond
	default:
		return Fatal(E_BAD_BODY, "IDENTIFY msg timeout (%d) is invalid", ms)
	}
	return nil
}

// negotiateDeflateLevel applies nsqd's rule: 6 unless the client asked for a
// positive level, then capped by the server maximum even when deflate is off.
// The cap at flate.BestCompression keeps a misconfigured maximum from making
// the upgrade fail.
func negotiateDeflateLevel(deflate bool, requested, maxLevel int) int {
	level := defaultDeflateLevel
	if deflate && requested > 0 {
		level = requested
	}
	return min(level, maxLevel, flate.BestCompression)
}
