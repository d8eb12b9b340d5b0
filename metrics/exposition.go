package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// The client library builds every series of a scrape as an object,
// checks it, sorts each family and only then writes it: at 10,000
// partitions, 700,000–900,000 series and 60–85 MB of text, 5–13 s of a
// core and gigabytes of garbage a scrape, long enough to make the node's
// etcd lease lapse. The per-partition and per-channel families are
// written here instead, as text straight from the actors' figures and the
// event histograms; the node-wide families still go through the library.

// textFormat is what a scrape answers: Prometheus's text format, which
// every Prometheus reads whatever it asked for first.
var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// serve writes the families want names (all when want is nil) as text.
func (m *Metrics) serve(w http.ResponseWriter, r *http.Request, want map[string]bool) {
	families, err := m.nodeWide(want).Gather()
	if err != nil {
		http.Error(w, "gathering metrics: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(textFormat))
	var out io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush()
	enc := expfmt.NewEncoder(bw, textFormat)
	for _, f := range families {
		if want != nil && !want[f.GetName()] {
			continue // a collector that gives more than was named
		}
		if enc.Encode(f) != nil {
			return // the client went away
		}
	}
	t := &textWriter{w: bw, node: m.node}
	if m.wantsStats(want) {
		t.rows(m.state.rows(), want)
	}
	for _, v := range m.events {
		if want == nil || want[v.name] {
			t.events(v)
		}
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); enc == "gzip" {
			return true
		}
	}
	return false
}

// nodeWide is a registry of the collectors whose families want names
// (every one when want is nil), the actors' figures and the event
// families left out.
func (m *Metrics) nodeWide(want map[string]bool) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	for _, p := range m.parts {
		if p.written {
			continue
		}
		for f := range p.families {
			if want == nil || want[f] {
				reg.MustRegister(p.c)
				break
			}
		}
	}
	return reg
}

// wantsStats reports whether want names a family read from the actors.
func (m *Metrics) wantsStats(want map[string]bool) bool {
	if want == nil {
		return true
	}
	for name := range want {
		if m.statsFamilies[name] {
			return true
		}
	}
	return false
}

// textWriter writes families in Prometheus's text format. Errors stick in
// the bufio.Writer and show at its Flush.
type textWriter struct {
	w    *bufio.Writer
	node string
	buf  []byte
	les  map[float64]string // bucket bounds as le values
}

func (t *textWriter) le(bound float64) string {
	s, ok := t.les[bound]
	if !ok {
		if t.les == nil {
			t.les = map[float64]string{}
		}
		s = string(appendValue(nil, bound))
		t.les[bound] = s
	}
	return s
}

func (t *textWriter) header(name, help, typ string) {
	t.w.WriteString("# HELP ")
	t.w.WriteString(name)
	t.w.WriteByte(' ')
	t.w.WriteString(helpEscaper.Replace(help))
	t.w.WriteString("\n# TYPE ")
	t.w.WriteString(name)
	t.w.WriteByte(' ')
	t.w.WriteString(typ)
	t.w.WriteByte('\n')
}

// sample writes name, labels (already written as `{...}`) and v.
func (t *textWriter) sample(name string, labels []byte, v float64) {
	t.w.WriteString(name)
	t.w.Write(labels)
	t.w.WriteByte(' ')
	t.buf = appendValue(t.buf[:0], v)
	t.buf = append(t.buf, '\n')
	t.w.Write(t.buf)
}

// rows writes the actors' figures, a family at a time: the format wants
// each family's series together.
func (t *textWriter) rows(r scrapeRows, want map[string]bool) {
	partLabels := make([][]byte, len(r.parts))
	for i, p := range r.parts {
		partLabels[i] = appendLabels(nil, "node", t.node, "partition", p.partition, "topic", p.st.Topic)
	}
	for _, f := range partFamilies {
		if want != nil && !want[f.name] {
			continue
		}
		t.header(f.name, f.help, f.typeName())
		for i := range r.parts {
			t.sample(f.name, partLabels[i], f.value(&r.parts[i]))
		}
	}
	chanLabels := make([][]byte, len(r.chans))
	for i, c := range r.chans {
		chanLabels[i] = appendLabels(nil, "channel", c.cs.Name, "node", t.node, "partition", c.part.partition, "topic", c.part.st.Topic)
	}
	for _, f := range chanFamilies {
		if want != nil && !want[f.name] {
			continue
		}
		t.header(f.name, f.help, f.typeName())
		for i := range r.chans {
			t.sample(f.name, chanLabels[i], f.value(&r.chans[i]))
		}
	}
	t.e2e(r, chanLabels, want)
}

// e2e writes the end-to-end latency families, of the channels that track
// it; like the client library, a family without a series is left out.
func (t *textWriter) e2e(r scrapeRows, chanLabels [][]byte, want map[string]bool) {
	var tracking []int
	for i, c := range r.chans {
		if c.cs.E2E != nil {
			tracking = append(tracking, i)
		}
	}
	if len(tracking) == 0 {
		return
	}
	if f := e2eCountFamily; want == nil || want[f.name] {
		t.header(f.name, f.help, f.typeName())
		for _, i := range tracking {
			t.sample(f.name, chanLabels[i], f.value(&r.chans[i]))
		}
	}
	if want != nil && !want[e2eName] {
		return
	}
	t.header(e2eName, e2eHelp, "gauge")
	for _, i := range tracking {
		c := &r.chans[i]
		for _, q := range c.cs.E2E.Percentiles() {
			labels := appendLabels(nil, "channel", c.cs.Name, "node", t.node, "partition", c.part.partition,
				"percentile", percentileLabel(q.Quantile), "topic", c.part.st.Topic)
			t.sample(e2eName, labels, q.Value/1e9)
		}
	}
}

// events writes an event family's series from the client library's
// vector, without its checks and sorting.
func (t *textWriter) events(v eventVec) {
	typ := "counter"
	if v.histogram {
		typ = "histogram"
	}
	ch := make(chan prometheus.Metric, 256)
	go func() {
		v.vec.Collect(ch)
		close(ch)
	}()
	var labels, le []byte
	wrote := false
	bucket, sum, count := v.name+"_bucket", v.name+"_sum", v.name+"_count"
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		if !wrote {
			t.header(v.name, v.help, typ)
			wrote = true
		}
		labels = appendPairs(labels[:0], d.Label)
		if !v.histogram {
			t.sample(v.name, labels, d.GetCounter().GetValue())
			continue
		}
		// A bucket's labels are the series' with le last, as the format
		// writes them.
		open := labels[:len(labels)-1]
		if len(d.Label) > 0 {
			open = append(open, ',')
		}
		h := d.GetHistogram()
		for _, b := range h.GetBucket() {
			le = appendLE(append(le[:0], open...), t.le(b.GetUpperBound()))
			t.sample(bucket, le, float64(b.GetCumulativeCount()))
		}
		le = appendLE(append(le[:0], open...), "+Inf")
		t.sample(bucket, le, float64(h.GetSampleCount()))
		labels = appendPairs(labels[:0], d.Label) // open shared its array
		t.sample(sum, labels, h.GetSampleSum())
		t.sample(count, labels, float64(h.GetSampleCount()))
	}
}

func appendLE(b []byte, bound string) []byte {
	b = append(b, `le="`...)
	b = append(b, bound...)
	return append(b, '"', '}')
}

// appendLabels appends `{k="v",...}` of the name and value pairs kv, in
// the order given.
func appendLabels(b []byte, kv ...string) []byte {
	b = append(b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, kv[i], kv[i+1])
	}
	return append(b, '}')
}

// appendPairs appends a series' label pairs as `{k="v",...}`.
func appendPairs(b []byte, pairs []*dto.LabelPair) []byte {
	b = append(b, '{')
	for i, p := range pairs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, p.GetName(), p.GetValue())
	}
	return append(b, '}')
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	if strings.ContainsAny(value, "\\\"\n") {
		b = append(b, labelEscaper.Replace(value)...)
	} else {
		b = append(b, value...)
	}
	return append(b, '"')
}

var (
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
)

// appendValue appends v as the text format writes a sample's value.
func appendValue(b []byte, v float64) []byte {
	switch {
	case v == 1:
		return append(b, '1')
	case v == 0:
		return append(b, '0')
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
