package dashboards

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/prometheus/prometheus/promql/parser"
)

var update = flag.Bool("update", false, "rewrite json/*.json from spec.go")

// catalogPath is the metrics catalog; the product module's TestCatalog
// regenerates it from real nodes' registries and fails when it is stale.
const catalogPath = "../docs/metrics.md"

// registerPlugins makes the strict parse know the panel and query types the
// dashboards use, so their options, field config and targets are checked
// field by field too (a panel of any other type fails the test).
func registerPlugins() {
	rt := cog.NewRuntime()
	rt.RegisterPanelcfgVariant(timeseries.VariantConfig())
	rt.RegisterPanelcfgVariant(stat.VariantConfig())
	rt.RegisterDataqueryVariant(prometheus.VariantConfig())
}

// TestJSONIsCurrent checks every committed dashboard is what spec.go
// builds (run `go test -run TestJSONIsCurrent -update` after editing it).
func TestJSONIsCurrent(t *testing.T) {
	for _, b := range Boards {
		got, err := b.JSON()
		if err != nil {
			t.Fatalf("%s: %v", b.File, err)
		}
		path := filepath.Join("json", b.File)
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `go test -run TestJSONIsCurrent -update` in dashboards/", path)
		}
	}
}

// TestDashboardsParseStrictly reads every committed dashboard as Grafana
// would import it: strictly, with every panel and query type known, and
// checks each panel has a unit and a description and PromQL that parses
// and uses only metrics a node exports.
func TestDashboardsParseStrictly(t *testing.T) {
	registerPlugins()
	exported := catalog(t)
	files, err := filepath.Glob("json/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(Boards) {
		t.Fatalf("json/ holds %d dashboards, spec.go %d", len(files), len(Boards))
	}
	used := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard.Dashboard
		if err := d.UnmarshalJSONStrict(raw); err != nil {
			t.Fatalf("%s: strict unmarshal: %v", f, err)
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: validate: %v", f, err)
		}
		if d.Uid == nil || d.Title == nil || len(d.Panels) == 0 {
			t.Fatalf("%s: no uid, title or panels", f)
		}
		checkVariables(t, f, d, exported, used)
		for _, pr := range d.Panels {
			if pr.Panel == nil {
				t.Fatalf("%s: rows are not used", f)
			}
			checkPanel(t, f, *pr.Panel, exported, used)
		}
	}
	t.Logf("%d metric names used, %d exported", len(used), len(exported))
}

func checkPanel(t *testing.T, file string, p dashboard.Panel, exported map[string]string, used map[string]bool) {
	t.Helper()
	name := file + ": panel " + deref(p.Title)
	if !slices.Contains([]string{"timeseries", "stat"}, p.Type) {
		t.Errorf("%s: type %q", name, p.Type)
	}
	if deref(p.Description) == "" {
		t.Errorf("%s: no description", name)
	}
	if p.FieldConfig == nil || deref(p.FieldConfig.Defaults.Unit) == "" {
		t.Errorf("%s: no unit", name)
	}
	if p.Datasource == nil || deref(p.Datasource.Type) != "prometheus" {
		t.Errorf("%s: datasource is not Prometheus", name)
	}
	if len(p.Targets) == 0 {
		t.Errorf("%s: no queries", name)
	}
	for _, target := range p.Targets {
		q, ok := target.(*prometheus.Dataquery)
		if !ok {
			t.Errorf("%s: query of type %T, want a Prometheus query", name, target)
			continue
		}
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(q.Expr))
		if err != nil {
			t.Errorf("%s: PromQL %q: %v", name, q.Expr, err)
			continue
		}
		for _, m := range metricNames(expr) {
			used[m] = true
			if _, ok := exported[baseName(m, exported)]; !ok {
				t.Errorf("%s: %q uses %s, which no node exports (docs/metrics.md)", name, q.Expr, m)
			}
		}
	}
}

var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*), ([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// checkVariables checks every query variable lists label values of an
// exported metric that has that label.
func checkVariables(t *testing.T, file string, d dashboard.Dashboard, exported map[string]string, used map[string]bool) {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := ""
		if v.Query != nil {
			q = deref(v.Query.String)
		}
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(metric, label)", file, v.Name, q)
			continue
		}
		used[m[1]] = true
		if _, ok := exported[m[1]]; !ok || !slices.Contains(catalogLabels[m[1]], m[2]) {
			t.Errorf("%s: variable %s: %s has no label %s in docs/metrics.md", file, v.Name, m[1], m[2])
		}
	}
}

// metricNames are the metric names an expression selects.
func metricNames(expr parser.Node) []string {
	var out []string
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == "__name__" {
					name = m.Value
				}
			}
			out = append(out, name)
		}
		return nil
	})
	return out
}

// baseName maps a histogram's or summary's series name to its family.
func baseName(name string, exported map[string]string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if typ := exported[base]; typ == "histogram" || (typ == "summary" && suffix != "_bucket") {
			return base
		}
	}
	return name
}

var catalogRow = regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\| ([a-z]+) \\| ([^|]*) \\|")

// catalogLabels are each family's label names, filled by catalog.
var catalogLabels = map[string][]string{}

// catalog reads the metric families and their types from docs/metrics.md.
func catalog(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range catalogRow.FindAllStringSubmatch(string(raw), -1) {
		out[m[1]] = m[2]
		catalogLabels[m[1]] = strings.Fields(strings.NewReplacer("`", "", ",", " ").Replace(m[3]))
	}
	if len(out) == 0 {
		t.Fatalf("%s lists no metrics", catalogPath)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// TestStrictParsingRejectsMistakes makes sure the strict parse above would
// catch a misspelt field in a panel or a query, and a query PromQL rejects.
func TestStrictParsingRejectsMistakes(t *testing.T) {
	registerPlugins()
	raw, err := os.ReadFile(filepath.Join("json", Boards[0].File))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ from, to string }{
		{`"title": "Live nodes"`, `"titel": "Live nodes"`},
		{`"legendFormat": "live nodes"`, `"legendFormatt": "live nodes"`},
		{`"fieldConfig": {`, `"fieldConfig": {"defaults": 3}, "x": {`},
	} {
		broken := strings.Replace(string(raw), bad.from, bad.to, 1)
		if broken == string(raw) {
			t.Fatalf("%q not found", bad.from)
		}
		var d dashboard.Dashboard
		if err := d.UnmarshalJSONStrict([]byte(broken)); err == nil {
			t.Errorf("replacing %q with %q still parses", bad.from, bad.to)
		}
	}
	if _, err := parser.NewParser(parser.Options{}).ParseExpr(Expand(`rate(partita_publish_messages_total{node=~"$node"}`)); err == nil {
		t.Error("unbalanced PromQL parses")
	}
}
