package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /channel/ratelimit: ratekilobytes is required, a whole number
// of 0 or more; the limit shows in /stats and /metrics, and 0 lifts it.
func TestChannelRateLimitArguments(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=rl", "", "")
	mustPost(t, n, "/channel/create?topic=rl&channel=ch", "", "")
	expectRefusals(t, n, http.MethodPost, []refusal{
		{"/channel/ratelimit?topic=rl&channel=ch", http.StatusBadRequest, "MISSING_ARG_RATEKILOBYTES"},
		{"/channel/ratelimit?topic=rl&channel=ch&ratekilobytes=-1", http.StatusBadRequest, "INVALID_ARG_RATEKILOBYTES"},
		{"/channel/ratelimit?topic=rl&channel=ch&ratekilobytes=1k", http.StatusBadRequest, "INVALID_ARG_RATEKILOBYTES"},
		{"/channel/ratelimit?channel=ch&ratekilobytes=1", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"/channel/ratelimit?topic=rl&channel=nosuch&ratekilobytes=1", http.StatusNotFound, "CHANNEL_NOT_FOUND"},
		{"/channel/ratelimit?topic=nosuch&channel=ch&ratekilobytes=1", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	})
	expectV1(t, n, http.MethodPost, "/channel/ratelimit?topic=rl&channel=ch&ratekilobytes=300", "", http.StatusOK, "")
	var doc struct {
		Topics []struct {
			Channels []struct {
				RateLimitKB int64 `json:"rate_limit_kb"`
			} `json:"channels"`
		} `json:"topics"`
	}
	limit := func() int64 {
		getJSON(t, n, "/stats?format=json&topic=rl", &doc)
		return doc.Topics[0].Channels[0].RateLimitKB
	}
	eventually(t, "the limit in /stats", func() bool { return limit() == 300 }, func() any { return limit() })
	if v := testnode.Metric(t, n.HTTPAddr(), "partita_channel_rate_limit_bytes", `channel="ch"`); v != "307200" {
		t.Fatalf("partita_channel_rate_limit_bytes %v, want 300 KB", v)
	}
	expectV1(t, n, http.MethodPost, "/channel/ratelimit?topic=rl&channel=ch&ratekilobytes=0", "", http.StatusOK, "")
	eventually(t, "no limit in /stats", func() bool { return limit() == 0 }, func() any { return limit() })
}

// clientEntry is a client of /stats as the client limit tests read it.
type clientEntry struct {
	ClientID      string `json:"client_id"`
	InFlightCount int64  `json:"in_flight_count"`
	LimitedRdy    *int64 `json:"limited_rdy"`
}

// youzan's /channel/setclientlimit: the consumers whose client ID starts
// with the prefix hold at most ready messages in flight, whatever their
// RDY; the others are not capped. ready is required, and a negative one
// lifts the cap, letting the capped consumer take what waits.
func TestChannelSetClientLimitCapsMatchingConsumers(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=cl", "", "")
	mustPost(t, n, "/channel/create?topic=cl&channel=ch", "", "")
	expectRefusals(t, n, http.MethodPost, []refusal{
		{"/channel/setclientlimit?topic=cl&channel=ch&client_prefix=slow", http.StatusBadRequest, "MISSING_ARG_READY"},
		{"/channel/setclientlimit?topic=cl&channel=ch&client_prefix=slow&ready=two", http.StatusBadRequest, "INVALID_ARG_READY"},
		{"/channel/setclientlimit?topic=cl&ready=1", http.StatusBadRequest, "MISSING_ARG_CHANNEL"},
	})
	expectV1(t, n, http.MethodPost, "/channel/setclientlimit?topic=cl&channel=ch&client_prefix=slow&ready=1", "", http.StatusOK, "")

	subscribe(t, n, "cl", "ch", map[string]any{"client_id": "slow-1"}, 10)
	subscribe(t, n, "cl", "ch", map[string]any{"client_id": "fast-1"}, 10)
	mustPost(t, n, "/mpub?topic=cl", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12", "OK")
	read := func() (depth int64, clients map[string]clientEntry, limits string) {
		var doc struct {
			Topics []struct {
				Channels []struct {
					Depth        int64           `json:"depth"`
					Clients      []clientEntry   `json:"clients"`
					ClientLimits json.RawMessage `json:"client_limits"`
				} `json:"channels"`
			} `json:"topics"`
		}
		getJSON(t, n, "/stats?format=json&topic=cl", &doc)
		ch := doc.Topics[0].Channels[0]
		clients = map[string]clientEntry{}
		for _, c := range ch.Clients {
			clients[c.ClientID] = c
		}
		return ch.Depth, clients, string(ch.ClientLimits)
	}
	eventually(t, "slow-1 holding 1 and fast-1 the window's 10, one waiting", func() bool {
		depth, clients, _ := read()
		return depth == 1 && clients["slow-1"].InFlightCount == 1 && clients["fast-1"].InFlightCount == 10
	}, func() any { _, clients, _ := read(); return clients })
	_, clients, limits := read()
	if l := clients["slow-1"].LimitedRdy; l == nil || *l != 1 || clients["fast-1"].LimitedRdy != nil {
		t.Fatalf("limited_rdy: %+v", clients)
	}
	if limits != `[{"client_prefix":"slow","ready":1}]` {
		t.Fatalf("client_limits %s", limits)
	}
	if v := testnode.Metric(t, n.HTTPAddr(), "partita_channel_client_limited_consumers", `channel="ch"`); v != "1" {
		t.Fatalf("partita_channel_client_limited_consumers %v, want 1", v)
	}

	expectV1(t, n, http.MethodPost, "/channel/setclientlimit?topic=cl&channel=ch&client_prefix=slow&ready=-1", "", http.StatusOK, "")
	eventually(t, "slow-1 taking the waiting message once uncapped", func() bool {
		depth, clients, limits := read()
		return depth == 0 && clients["slow-1"].InFlightCount == 2 && limits == "[]"
	}, func() any { _, clients, _ := read(); return clients })
}

// youzan's /channel/emptydelayed and /channel/requeuedelayed: offset is
// whole hours, a partition must be one of the topic's, and each answers
// how many messages it dropped or made due, here none.
func TestChannelDelayedArguments(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=dl", "", "")
	mustPost(t, n, "/channel/create?topic=dl&channel=ch", "", "")
	expectRefusals(t, n, http.MethodPost, []refusal{
		{"/channel/requeuedelayed?topic=dl&channel=ch&offset=-1", http.StatusBadRequest, "INVALID_ARG_OFFSET"},
		{"/channel/requeuedelayed?topic=dl&channel=ch&offset=1h", http.StatusBadRequest, "INVALID_ARG_OFFSET"},
		{"/channel/emptydelayed?topic=dl&channel=ch&partition=1", http.StatusBadRequest, "INVALID_PARTITION"},
		{"/channel/emptydelayed?topic=dl", http.StatusBadRequest, "MISSING_ARG_CHANNEL"},
		{"/channel/emptydelayed?topic=dl&channel=nosuch", http.StatusNotFound, "CHANNEL_NOT_FOUND"},
	})
	expectV1(t, n, http.MethodPost, "/channel/emptydelayed?topic=dl&channel=ch", "", http.StatusOK, `{"emptied":0}`)
	expectV1(t, n, http.MethodPost, "/channel/requeuedelayed?topic=dl&channel=ch&partition=0", "", http.StatusOK, `{"requeued":0}`)
}

// youzan's /message/historystats: a partition's 22 whole hours before this
// one and this hour's bytes so far, counted from the node's first sample;
// the node's list without a topic; a bad partition or topic refused.
func TestMessageHistoryStats(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=hs", "", "")
	expectRefusals(t, n, http.MethodGet, []refusal{
		{"/message/historystats?topic=hs&partition=1", http.StatusBadRequest, "INVALID_PARTITION"},
		{"/message/historystats?topic=nosuch", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	})
	var doc struct {
		Hours   []int64 `json:"hourly_pub_size"`
		Current int64   `json:"current_hour_pub_size"`
	}
	getJSON(t, n, "/message/historystats?topic=hs", &doc)
	before := doc.Current
	mustPost(t, n, "/pub?topic=hs", "a message", "OK")
	getJSON(t, n, "/message/historystats?topic=hs&partition=0", &doc)
	if len(doc.Hours) != 22 || doc.Current <= before {
		t.Fatalf("after a publish: %d hours, this hour %d (was %d)", len(doc.Hours), doc.Current, before)
	}
	// The last whole hour counts nothing, unless the hour turned since the
	// publish.
	if a := call(t, n, http.MethodGet, "/message/historystats", ""); a.status != http.StatusOK ||
		!strings.HasPrefix(a.body, `{"node_hourly_pub_size_stats":[{"topic_name":"hs","topic_partition":"0","hourly_pub_size":`) {
		t.Fatalf("the node's list: %d %s", a.status, a.body)
	}
}

// refusal is a call and the error it must be answered with.
type refusal struct {
	path   string
	status int
	code   string
}

// expectRefusals makes each call and requires its V1 error.
func expectRefusals(t *testing.T, n *testnode.Node, method string, rs []refusal) {
	t.Helper()
	for _, r := range rs {
		expectV1(t, n, method, r.path, "", r.status, errBody(r.code))
	}
}

// An ephemeral channel, which the cluster's metadata does not hold, takes
// client limits too, for as long as it lives.
func TestEphemeralChannelClientLimit(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=ecl", "", "")
	subscribe(t, n, "ecl", "ch#ephemeral", map[string]any{"client_id": "slow-2"}, 5)
	expectV1(t, n, http.MethodPost, "/channel/setclientlimit?topic=ecl&channel=ch%23ephemeral&client_prefix=slow&ready=1", "", http.StatusOK, "")
	mustPost(t, n, "/mpub?topic=ecl", "1\n2\n3", "OK")
	waitChannel(t, n, "ecl", "ch#ephemeral", "one in flight, two waiting", func(cs channelStats) bool {
		return cs.InFlightCount == 1 && cs.Depth == 2
	})
}

// /channel/requeuedelayed with an offset of more hours than a duration
// holds makes every deferred message due, as any offset past them does,
// rather than a time wrapped into the past that makes none due.
func TestRequeueDelayedLongOffset(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=dl2", "", "")
	mustPost(t, n, "/channel/create?topic=dl2&channel=ch", "", "")
	mustPost(t, n, "/pub?topic=dl2&defer=3000000", "later", "OK")
	waitChannel(t, n, "dl2", "ch", "one deferred", func(cs channelStats) bool { return cs.DeferredCount == 1 })
	expectV1(t, n, http.MethodPost, "/channel/requeuedelayed?topic=dl2&channel=ch&offset=3000000", "", http.StatusOK, `{"requeued":1}`)
}
