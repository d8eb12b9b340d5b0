package metrics

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// flatten is every sample of families as "name{sorted labels}" → value,
// and every family's help and type, so two ways of exposing them compare
// whatever their order.
func flatten(families map[string]*dto.MetricFamily) (samples map[string]float64, meta map[string]string) {
	samples, meta = map[string]float64{}, map[string]string{}
	for name, mf := range families {
		meta[name] = mf.GetType().String() + " " + mf.GetHelp()
		for _, m := range mf.GetMetric() {
			key := func(suffix string, extra ...string) string {
				var ls []string
				for _, lp := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				}
				ls = append(ls, extra...)
				sort.Strings(ls)
				return name + suffix + "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Histogram != nil:
				// The library leaves the +Inf bucket implicit in its count;
				// parsed text has it as written.
				h := m.GetHistogram()
				samples[key("_bucket", `le="+Inf"`)] = float64(h.GetSampleCount())
				for _, b := range h.GetBucket() {
					le := fmt.Sprint(b.GetUpperBound())
					if math.IsInf(b.GetUpperBound(), 1) {
						le = "+Inf"
					}
					samples[key("_bucket", fmt.Sprintf("le=%q", le))] = float64(b.GetCumulativeCount())
				}
				samples[key("_sum")] = h.GetSampleSum()
				samples[key("_count")] = float64(h.GetSampleCount())
			case m.Counter != nil:
				samples[key("")] = m.GetCounter().GetValue()
			default:
				samples[key("")] = m.GetGauge().GetValue()
			}
		}
	}
	return samples, meta
}

// The families a scrape writes as text hold what the client library
// gathers from the same figures: every family with its help and type,
// every series with its labels (escaped where they must be) and value.
func TestScrapeWritesWhatTheLibraryGathers(t *testing.T) {
	now := time.Now()
	e2e := channel.NewE2E([]float64{0.5, 0.99}, time.Minute, now)
	e2e.Observe(3*time.Millisecond, now)
	src := &fixedStats{stats: []*topic.Stats{
		{Topic: "orders", Partition: 0, Leader: true, Writable: true, ISR: 2, Replicas: 3, Followers: []string{"n2", "n3"},
			End: 4096, MessageCount: 1e7, MessageBytes: 123456789, Syncs: 3, Waiting: 2, InFlight: 1, DedupeHits: 4,
			Channels: []channel.Snapshot{
				{Name: "billing", Stats: channel.Stats{Depth: 5, InFlight: 2, RequeueCount: 1, EndCount: 10, ConfirmedCount: 4}, Consumers: []int64{1, 2}, Oldest: now.Add(-time.Second).UnixNano(), E2E: e2e.Summary(now)},
				{Name: "audit#ephemeral", Stats: channel.Stats{RateLimitKB: 2}},
			}},
		{Topic: `odd"to\pic`, Partition: 7, Replicas: 3, ISR: 3, Catchup: 1},
	}}
	m := New(Options{Node: "n1", Stats: src})
	m.ObservePublish("orders", 0, 2*time.Millisecond)
	m.ObservePublish("orders", 0, 30*time.Second)
	m.Observer().Committed("orders", 0, 1, time.Millisecond)
	m.Observer().ReplicaAcked("orders", 0, "n2", 700*time.Microsecond)
	m.Observer().ISRShrunk("orders", 0, 1)
	m.Observer().CatchUpSent("orders", 0, "n3", 5, 1000)
	m.Observer().BecameLeader(`odd"to\pic`, 7)

	scrape := func(gz bool) map[string]*dto.MetricFamily {
		t.Helper()
		req := httptest.NewRequest("GET", "/metrics", nil)
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
		}
		var body io.Reader = rec.Body
		if gz {
			if rec.Header().Get("Content-Encoding") != "gzip" {
				t.Fatal("a scrape accepting gzip was answered plain")
			}
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		if ct := rec.Header().Get("Content-Type"); expfmt.ResponseFormat(rec.Header()).FormatType() != expfmt.TypeTextPlain {
			t.Fatalf("Content-Type %q is not Prometheus's text format", ct)
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("the scrape is not valid text: %v\n%s", err, raw)
		}
		return families
	}
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*dto.MetricFamily{}
	for _, mf := range gathered {
		want[mf.GetName()] = mf
	}
	wantSamples, wantMeta := flatten(want)
	for _, gz := range []bool{false, true} {
		gotSamples, gotMeta := flatten(scrape(gz))
		for name, meta := range wantMeta {
			if gotMeta[name] != meta {
				t.Errorf("gzip %v: family %s: %q, the library gathers %q", gz, name, gotMeta[name], meta)
			}
		}
		for name := range gotMeta {
			if _, ok := wantMeta[name]; !ok {
				t.Errorf("gzip %v: family %s written but not gathered", gz, name)
			}
		}
		for k, v := range wantSamples {
			got, ok := gotSamples[k]
			switch {
			case strings.HasPrefix(k, "go_") || strings.HasPrefix(k, "process_") || strings.Contains(k, "lag_seconds"):
				// They move between the two reads.
			case !ok:
				t.Errorf("gzip %v: %s missing from the scrape", gz, k)
			case got != v:
				t.Errorf("gzip %v: %s = %v, the library gathers %v", gz, k, got, v)
			}
		}
		if len(gotSamples) != len(wantSamples) {
			t.Errorf("gzip %v: %d samples written, %d gathered", gz, len(gotSamples), len(wantSamples))
		}
	}
	// The figures are there at all, not merely equal in their absence.
	for _, k := range []string{
		`partita_publish_messages_total{node="n1",partition="0",topic="orders"}`,
		`partita_partition_catchup_replicas{node="n1",partition="7",topic="odd\"to\\pic"}`,
		`partita_channel_consumers{channel="billing",node="n1",partition="0",topic="orders"}`,
		`partita_channel_e2e_processing_latency_seconds{channel="billing",node="n1",partition="0",percentile="99",topic="orders"}`,
		`partita_replica_ack_latency_seconds_count{follower="n2",node="n1",partition="0",topic="orders"}`,
		`partita_leader_elections_total{node="n1",partition="7",topic="odd\"to\\pic"}`,
	} {
		if wantSamples[k] == 0 {
			t.Errorf("%s is %v, want the figure given", k, wantSamples[k])
		}
	}
}

// A full scrape of a node of 10,000 partitions, each with a channel and
// two followers: written as the node does, and gathered by the client
// library as it did before.
//
//	go test -run '^$' -bench Scrape -benchtime=5x ./metrics/
func BenchmarkScrape(b *testing.B) {
	var stats []*topic.Stats
	for i := range 10000 {
		stats = append(stats, &topic.Stats{Topic: fmt.Sprintf("topic%d", i/4), Partition: int32(i % 4), Leader: true,
			ISR: 3, Replicas: 3, Followers: []string{"n2", "n3"}, Channels: []channel.Snapshot{{Name: "ch"}}})
	}
	m := New(Options{Node: "n1", Stats: &fixedStats{stats: stats}})
	for _, st := range stats {
		m.ObservePublish(st.Topic, st.Partition, time.Millisecond)
	}
	run := func(b *testing.B, h interface {
		ServeHTTP(http.ResponseWriter, *http.Request)
	}) {
		for b.Loop() {
			w := &discarded{header: http.Header{}}
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
			if w.code != 0 && w.code != 200 {
				b.Fatal(w.code)
			}
			b.SetBytes(w.n)
		}
	}
	b.Run("written", func(b *testing.B) { run(b, m.Handler()) })
	b.Run("gathered", func(b *testing.B) { run(b, promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})) })
}

// discarded is a ResponseWriter that counts the body and keeps none of it,
// as a client reading a scrape off the socket would.
type discarded struct {
	header http.Header
	code   int
	n      int64
}

func (d *discarded) Header() http.Header  { return d.header }
func (d *discarded) WriteHeader(code int) { d.code = code }
func (d *discarded) Write(b []byte) (int, error) {
	d.n += int64(len(b))
	return len(b), nil
}
