package metrics_test

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/metrics"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var updateCatalog = flag.Bool("update-catalog", false, "rewrite docs/metrics.md from real nodes' registries")

const catalogPath = "../docs/metrics.md"

// TestCatalog gathers /metrics from two real nodes, one leading a
// replicated partition with a channel and one following it, tracking the
// end-to-end latency, so every family has a series, and checks
// docs/metrics.md says exactly that.
func TestCatalog(t *testing.T) {
	e2e := []string{"--e2e-processing-latency-percentile", "0.99"}
	n1 := testnode.Start(t, append([]string{"--node-id", "n1"}, e2e...)...)
	n2 := testnode.Start(t, append([]string{"--node-id", "n2", "--etcd-endpoints", flagValue(t, n1.Args, "--etcd-client-address")}, e2e...)...)
	code, body := n1.Post(t, "/topic/create?topic=catalog&partition_num=1&replicator=2", "")
	if code != http.StatusOK {
		t.Fatalf("creating topic: %d %s", code, body)
	}
	testnode.Eventually(t, 10*time.Second, "a publish to the replicated topic", func() bool {
		for _, n := range []*testnode.Node{n1, n2} {
			if code, _ := n.Post(t, "/pub?topic=catalog", "hello"); code == http.StatusOK {
				return true
			}
		}
		return false
	})
	for _, n := range []*testnode.Node{n1, n2} {
		n.Post(t, "/channel/create?topic=catalog&channel=c", "")
	}
	families := map[string]*dto.MetricFamily{}
	testnode.Eventually(t, 10*time.Second, "a replica ack latency series", func() bool {
		for _, n := range []*testnode.Node{n1, n2} {
			for name, mf := range scrape(t, n) {
				if prev, ok := families[name]; ok {
					mf.Metric = append(mf.Metric, prev.Metric...)
				}
				families[name] = mf
			}
		}
		_, ok := families["partita_replica_ack_latency_seconds"]
		return ok
	})
	got := metrics.Catalog(families)
	if *updateCatalog {
		if err := os.WriteFile(catalogPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(catalogPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("%s is stale: run `go generate ./metrics/`\n--- generated:\n%s", filepath.Base(catalogPath), got)
	}
}

func flagValue(t *testing.T, args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no %s in %v", name, args)
	return ""
}

func scrape(t *testing.T, n *testnode.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(n.URL("/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(fmt.Errorf("parsing /metrics: %w", err))
	}
	return families
}
