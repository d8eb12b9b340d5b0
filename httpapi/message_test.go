package httpapi_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

type foundMessage struct {
	ID        string `json:"id"`
	Body      string `json:"body"`
	Offset    int64  `json:"offset"`
	Size      int32  `json:"raw_size"`
	Count     int64  `json:"count"`
	TraceID   uint64 `json:"trace_id"`
	DeliverAt int64  `json:"deliver_at"`
	Channels  []struct {
		Channel  string `json:"channel"`
		State    string `json:"state"`
		Deferred bool   `json:"deferred"`
		Attempts int    `json:"attempts"`
	} `json:"channels"`
}

func getMessage(t *testing.T, n *testnode.Node, query string) foundMessage {
	t.Helper()
	var m foundMessage
	getJSON(t, n, "/message/get?topic=mg&partition=0&"+query, &m)
	return m
}

// states is "channel=state" for every channel, in channel order.
func (m foundMessage) states() string {
	s := ""
	for _, c := range m.Channels {
		s += fmt.Sprintf("%s=%s ", c.Channel, c.State)
	}
	return s
}

// /message/get finds a message by count, ID and offset and follows it
// through delivery, a timeout and FIN in one channel while another channel
// still has it waiting.
func TestMessageGetFollowsDeliveryTimeoutAndFin(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=mg", "", "")
	mustPost(t, n, "/channel/create?topic=mg&channel=a", "", "")
	mustPost(t, n, "/channel/create?topic=mg&channel=b", "", "")
	mustPost(t, n, "/mpub?topic=mg", "x\ny", "OK")
	waitChannelDepth(t, n, "mg", "a", 2)

	x := getMessage(t, n, "search_mode=count&search_pos=0")
	if x.Body != "x" || x.Offset != 0 || x.Count != 0 || x.states() != "a=waiting b=waiting " {
		t.Fatalf("before delivery: %+v", x)
	}
	y := getMessage(t, n, "search_mode=count&search_pos=1")
	if y.Body != "y" || y.Offset != int64(x.Size) || y.Count != 1 {
		t.Fatalf("second message: %+v", y)
	}
	if byID := getMessage(t, n, "search_mode=id&search_pos="+y.ID); byID.Body != "y" {
		t.Fatalf("by ID %s: %+v", y.ID, byID)
	}
	if inside := getMessage(t, n, fmt.Sprintf("search_mode=virtual_offset&search_pos=%d", y.Offset+3)); inside.Body != "y" {
		t.Fatalf("by an offset inside y: %+v", inside)
	}

	c := subscribe(t, n, "mg", "a", map[string]any{"msg_timeout": 1000}, 1)
	if m := c.message(); string(m.Body) != "x" {
		t.Fatalf("delivered %q", m.Body)
	}
	c.send(nsq.Ready(0)) // so the timed-out message stays waiting
	if got := getMessage(t, n, "search_mode=count&search_pos=0"); got.states() != "a=in_flight b=waiting " || got.Channels[0].Attempts != 1 {
		t.Fatalf("in flight: %+v", got)
	}
	eventually(t, "x timed out in a", func() bool {
		return getMessage(t, n, "search_mode=count&search_pos=0").states() == "a=waiting b=waiting "
	}, func() any { return getMessage(t, n, "search_mode=count&search_pos=0") })

	c.send(nsq.Ready(1))
	m := c.message()
	if string(m.Body) != "x" || m.Attempts != 2 {
		t.Fatalf("redelivered %q attempt %d", m.Body, m.Attempts)
	}
	c.send(nsq.Finish(m.ID))
	eventually(t, "x confirmed in a", func() bool {
		return getMessage(t, n, "search_mode=count&search_pos=0").states() == "a=confirmed b=waiting "
	}, func() any { return getMessage(t, n, "search_mode=count&search_pos=0") })

	expectV1(t, n, http.MethodGet, "/message/get?topic=mg&partition=0&search_mode=count&search_pos=9", "", http.StatusNotFound, errBody("MESSAGE_NOT_FOUND"))
	expectV1(t, n, http.MethodGet, "/message/get?topic=mg&partition=0&search_mode=bad&search_pos=0", "", http.StatusBadRequest, errBody("INVALID_SEARCH_MODE"))
	expectV1(t, n, http.MethodGet, "/message/get?topic=mg&partition=4&search_mode=count&search_pos=0", "", http.StatusNotFound, errBody("PARTITION_NOT_FOUND"))
}

// A traced publish's trace ID and a DPUB's delivery time are kept with the
// message, and a deferred message shows as waiting, deferred.
func TestMessageGetShowsTraceAndDefer(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=mg", "", "")
	mustPost(t, n, "/channel/create?topic=mg&channel=a", "", "")
	p := dial(t, n, nil)
	p.send(&nsq.Command{Name: []byte("PUB_TRACE"), Params: [][]byte{[]byte("mg")}, Body: append(binary.BigEndian.AppendUint64(nil, 77), "traced"...)})
	p.expectResponse()
	p.send(nsq.DeferredPublish("mg", 3600_000_000_000, []byte("later")))
	p.expectResponse()

	if m := getMessage(t, n, "search_mode=count&search_pos=0"); m.Body != "traced" || m.TraceID != 77 {
		t.Fatalf("traced message: %+v", m)
	}
	var pt struct {
		Status      string `json:"status"`
		ID          string `json:"id"`
		TraceID     string `json:"trace_id"`
		QueueOffset int64  `json:"queue_offset"`
		RawSize     int32  `json:"rawsize"`
	}
	a := call(t, n, http.MethodPost, "/pubtrace?topic=mg&trace_id=99", "over http")
	if a.status != http.StatusOK || json.Unmarshal([]byte(a.body), &pt) != nil || pt.Status != "OK" || pt.TraceID != "99" {
		t.Fatalf("/pubtrace: %d %s", a.status, a.body)
	}
	if m := getMessage(t, n, "search_mode=id&search_pos="+pt.ID); m.Body != "over http" || m.TraceID != 99 || m.Offset != pt.QueueOffset || m.Size != pt.RawSize {
		t.Fatalf("/pubtrace answered %+v, the message is %+v", pt, m)
	}
	eventually(t, "the DPUB read by the channel", func() bool {
		m := getMessage(t, n, "search_mode=count&search_pos=1")
		return m.DeliverAt > 0 && len(m.Channels) == 1 && m.Channels[0].Deferred && m.Channels[0].State == "waiting"
	}, func() any { return getMessage(t, n, "search_mode=count&search_pos=1") })
}
