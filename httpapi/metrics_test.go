package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func scrape(t testing.TB, n *testnode.Node) map[string]*dto.MetricFamily {
	t.Helper()
	a := call(t, n, http.MethodGet, "/metrics", "")
	if a.status != http.StatusOK {
		t.Fatalf("/metrics: %d %s", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("/metrics Content-Type %q, want Prometheus text", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(a.body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, a.body)
	}
	return families
}

// sample finds the sample of name whose labels include want and returns its
// value (a histogram's sample count).
func sample(families map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	mf, ok := families[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range mf.GetMetric() {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func TestMetrics(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=m&partition_num=2", "", "")
	mustPost(t, n, "/channel/create?topic=m&channel=slow", "", "")
	mustPost(t, n, "/channel/create?topic=m&channel=fast", "", "")
	mustPost(t, n, "/pub?topic=m&partition=0", "hello", "OK")
	mustPost(t, n, "/pub?topic=m&partition=0", "world", "OK")
	mustPost(t, n, "/mpub?topic=m&partition=1", "a\nb\nc", "OK")

	// slow: one message in flight and one requeued (then redelivered).
	slow := subscribePartition(t, n, "m", "slow", 0, nil, 1)
	first := slow.message()
	slow.send(nsq.Requeue(first.ID, 0))
	if again := slow.message(); again.ID != first.ID || again.Attempts != 2 {
		t.Fatalf("after REQ got %s attempt %d, want %s attempt 2", again.ID, again.Attempts, first.ID)
	}
	// fast: a one-second message timeout that runs out.
	fast := subscribePartition(t, n, "m", "fast", 0, map[string]any{"msg_timeout": 1000}, 1)
	fast.message()

	p0 := map[string]string{"topic": "m", "partition": "0"}
	p1 := map[string]string{"topic": "m", "partition": "1"}
	with := func(labels map[string]string, channel string) map[string]string {
		out := map[string]string{"channel": channel}
		for k, v := range labels {
			out[k] = v
		}
		return out
	}
	var families map[string]*dto.MetricFamily
	checks := []struct {
		name   string
		labels map[string]string
		ok     func(float64) bool
		want   string
	}{
		{"partita_publish_messages_total", p0, func(v float64) bool { return v == 2 }, "2"},
		{"partita_publish_messages_total", p1, func(v float64) bool { return v == 3 }, "3"},
		{"partita_publish_bytes_total", p0, func(v float64) bool { return v >= float64(len("helloworld")) }, ">= 10"},
		{"partita_publish_bytes_total", p1, func(v float64) bool { return v >= 3 }, ">= 3"},
		{"partita_publish_latency_seconds", p0, func(v float64) bool { return v == 2 }, "2 observations"},
		{"partita_publish_latency_seconds", p1, func(v float64) bool { return v == 1 }, "1 observation"},
		{"partita_channel_in_flight", with(p0, "slow"), func(v float64) bool { return v == 1 }, "1"},
		{"partita_channel_in_flight", with(p1, "slow"), func(v float64) bool { return v == 0 }, "0"},
		{"partita_channel_depth", with(p0, "slow"), func(v float64) bool { return v == 1 }, "1"},
		{"partita_channel_depth", with(p1, "slow"), func(v float64) bool { return v == 3 }, "3"},
		{"partita_channel_requeues_total", with(p0, "slow"), func(v float64) bool { return v == 1 }, "1"},
		{"partita_channel_requeues_total", with(p0, "fast"), func(v float64) bool { return v == 0 }, "0"},
		{"partita_channel_timeouts_total", with(p0, "slow"), func(v float64) bool { return v == 0 }, "0"},
		{"partita_channel_timeouts_total", with(p0, "fast"), func(v float64) bool { return v >= 1 }, ">= 1"},
	}
	defer func() {
		if t.Failed() {
			for _, c := range checks {
				v, ok := sample(families, c.name, c.labels)
				t.Logf("%s%v = %v (present %v), want %s", c.name, c.labels, v, ok, c.want)
			}
		}
	}()
	testnode.Eventually(t, waitFor, "metrics to match", func() bool {
		families = scrape(t, n)
		for _, c := range checks {
			if v, ok := sample(families, c.name, c.labels); !ok || !c.ok(v) {
				return false
			}
		}
		return true
	})
}
