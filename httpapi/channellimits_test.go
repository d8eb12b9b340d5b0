package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

// youzan's /channel/ratelimit: ratekilobytes is required, a whole number
// of 0 or more; the limit shows in /stats and /metrics, and 0 lifts it.
func TestChannelRateLimitArguments(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=rl", "", "")
	mustPost(t, n, "/channel/create?topic=rl&channel=ch", "", "")
	for _, c := range []struct {
		query  string
		status int
		code   string
	}{
		{"topic=rl&channel=ch", http.StatusBadRequest, "MISSING_ARG_RATEKILOBYTES"},
		{"topic=rl&channel=ch&ratekilobytes=-1", http.StatusBadRequest, "INVALID_ARG_RATEKILOBYTES"},
		{"topic=rl&channel=ch&ratekilobytes=1k", http.StatusBadRequest, "INVALID_ARG_RATEKILOBYTES"},
		{"channel=ch&ratekilobytes=1", http.StatusBadRequest, "MISSING_ARG_TOPIC"},
		{"topic=rl&channel=nosuch&ratekilobytes=1", http.StatusNotFound, "CHANNEL_NOT_FOUND"},
		{"topic=nosuch&channel=ch&ratekilobytes=1", http.StatusNotFound, "TOPIC_NOT_FOUND"},
	} {
		expectV1(t, n, http.MethodPost, "/channel/ratelimit?"+c.query, "", c.status, errBody(c.code))
	}
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
	if v := testnode.Metric(t, n.HTTPAddr(), "partita_channel_rate_limit_kilobytes", `channel="ch"`); v != "300" {
		t.Fatalf("partita_channel_rate_limit_kilobytes %v, want 300", v)
	}
	expectV1(t, n, http.MethodPost, "/channel/ratelimit?topic=rl&channel=ch&ratekilobytes=0", "", http.StatusOK, "")
	eventually(t, "no limit in /stats", func() bool { return limit() == 0 }, func() any { return limit() })
}
