package httpapi_test

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// With --e2e-processing-latency-percentile, /stats shows each channel's
// and topic's FIN count over the window and each quantile of the time from
// a message's publish to its FIN, in nanoseconds, as nsqd does; it agrees
// with what the consumer measured itself, up to the FIN's trip back.
func TestE2EProcessingLatencyInStats(t *testing.T) {
	n := testnode.Start(t, "--e2e-processing-latency-percentile", "0.5,1.0")
	mustPost(t, n, "/topic/create?topic=e2e", "", "")
	mustPost(t, n, "/channel/create?topic=e2e&channel=c", "", "")
	const msgs = 20
	for range msgs {
		mustPost(t, n, "/pub?topic=e2e", "m", "OK")
	}
	var mu sync.Mutex
	var seen []time.Duration
	c := newConsumer(t, "e2e", "c", nil, nsq.HandlerFunc(func(m *nsq.Message) error {
		mu.Lock()
		seen = append(seen, time.Since(time.Unix(0, m.Timestamp)))
		mu.Unlock()
		return nil
	}))
	if err := c.ConnectToNSQD(n.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	type latency struct {
		Count       int                  `json:"count"`
		Percentiles []map[string]float64 `json:"percentiles"`
	}
	var doc struct {
		Topics []struct {
			E2E      latency `json:"e2e_processing_latency"`
			Channels []struct {
				E2E latency `json:"e2e_processing_latency"`
			} `json:"channels"`
		} `json:"topics"`
	}
	eventually(t, "every FIN counted", func() bool {
		a := call(t, n, "GET", "/stats?format=json&topic=e2e", "")
		return json.Unmarshal([]byte(a.body), &doc) == nil && len(doc.Topics) == 1 &&
			len(doc.Topics[0].Channels) == 1 && doc.Topics[0].Channels[0].E2E.Count == msgs
	}, func() any { return doc })
	mu.Lock()
	longest := slices.Max(seen)
	mu.Unlock()
	for what, l := range map[string]latency{"topic": doc.Topics[0].E2E, "channel": doc.Topics[0].Channels[0].E2E} {
		if l.Count != msgs || len(l.Percentiles) != 2 || l.Percentiles[0]["quantile"] != 0.5 || l.Percentiles[1]["quantile"] != 1 {
			t.Fatalf("%s: %+v, want %d FINs and quantiles 0.5 and 1", what, l, msgs)
		}
		p100 := time.Duration(l.Percentiles[1]["value"])
		if p100 < longest || p100 > longest+time.Second {
			t.Errorf("%s: the slowest FIN took %v, the consumer saw at most %v before its FIN", what, p100, longest)
		}
		if p50 := time.Duration(l.Percentiles[0]["value"]); p50 <= 0 || p50 > p100 {
			t.Errorf("%s: p50 %v, p100 %v", what, p50, p100)
		}
	}

	// Without the flag, as nsqd without it: a count of 0 and no list.
	plain := testnode.Start(t)
	mustPost(t, plain, "/topic/create?topic=e2e", "", "")
	mustPost(t, plain, "/channel/create?topic=e2e&channel=c", "", "")
	a := call(t, plain, "GET", "/stats?format=json&topic=e2e", "")
	if err := json.Unmarshal([]byte(a.body), &doc); err != nil || len(doc.Topics) != 1 ||
		doc.Topics[0].E2E.Percentiles != nil || doc.Topics[0].Channels[0].E2E.Percentiles != nil {
		t.Fatalf("without the flag: %s", a.body)
	}
}
