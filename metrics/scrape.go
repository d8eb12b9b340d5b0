package metrics

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// A scrape of /metrics gathers every family: with thousands of partitions
// that is hundreds of thousands of series, every partition and channel
// actor asked for its figures, and the series sorted, about a second of
// a core at 10,000 partitions. A scrape that names its families
// (name[]=...; Prometheus's scrape_config params can) gathers only the
// collectors that give them, so a watcher of a few node-wide figures
// costs the node next to nothing.

// part is a collector and the families it gives.
type part struct {
	families map[string]bool
	c        prometheus.Collector
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
// gathered from the collectors that give them.
func (m *Metrics) Handler() http.Handler {
	full := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		names := r.URL.Query()["name[]"]
		if len(names) == 0 {
			full.ServeHTTP(w, r)
			return
		}
		promhttp.HandlerFor(m.gathererFor(names), promhttp.HandlerOpts{}).ServeHTTP(w, r)
	})
}

// gathererFor is a registry of the parts that give any of the families
// names (family names, as promhttp's own name[] filter takes them: a
// histogram's, not its _bucket series').
func (m *Metrics) gathererFor(names []string) prometheus.Gatherer {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	reg := prometheus.NewRegistry()
	for _, p := range m.parts {
		for f := range p.families {
			if want[f] {
				reg.MustRegister(p.c)
				break
			}
		}
	}
	return reg
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
