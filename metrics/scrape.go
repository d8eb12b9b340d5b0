package metrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// A scrape of /metrics gathers every family: with thousands of partitions
// that is hundreds of thousands of series, every partition and channel
// actor asked for its figures, and the series sorted, about a second of
// a core at 10,000 partitions. A scrape that names its families
// (name[]=...; Prometheus's scrape_config params can) gathers only the
// collectors that give them, so a watcher of a few node-wide figures
// costs the node next to nothing.

// part is a collector and the families it gives; written: a scrape writes
// its families itself (exposition.go) rather than gathering them.
type part struct {
	families map[string]bool
	c        prometheus.Collector
	written  bool
}

// register registers cs in the node's registry and as parts.
func (m *Metrics) register(cs ...prometheus.Collector) {
	m.Registry.MustRegister(cs...)
	m.addParts(cs...)
}

func (m *Metrics) addParts(cs ...prometheus.Collector) {
	for _, c := range cs {
		m.parts = append(m.parts, part{families: familiesOf(c), c: c})
	}
}

// familiesOf is the names of the families c describes.
func familiesOf(c prometheus.Collector) map[string]bool {
	ch := make(chan *prometheus.Desc)
	go func() {
		c.Describe(ch)
		close(ch)
	}()
	names := map[string]bool{}
	for d := range ch {
		if name, ok := descName(d); ok {
			names[name] = true
		}
	}
	return names
}

// descName reads a Desc's name from its String, the only place the
// client library shows it: `Desc{fqName: "name", ...}`.
func descName(d *prometheus.Desc) (string, bool) {
	s, ok := strings.CutPrefix(d.String(), "Desc{fqName: ")
	if !ok {
		return "", false
	}
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", false
	}
	name, err := strconv.Unquote(q)
	return name, err == nil
}

// Handler serves /metrics: every family, or with name[] only those named,
// from the collectors that give them.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var want map[string]bool
		if names := r.URL.Query()["name[]"]; len(names) > 0 {
			want = make(map[string]bool, len(names))
			for _, n := range names {
				want[n] = true
			}
		}
		m.serve(w, r, want)
	})
}

// recorder is a Registerer that keeps what is registered with it, so
// that collectors wrapped with the node's label can be registered
// elsewhere too.
type recorder struct{ cs []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.cs = append(r.cs, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.cs = append(r.cs, cs...)
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }
