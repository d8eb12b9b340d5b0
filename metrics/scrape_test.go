package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/partitamq/partita/actors/topic"
)

// countedStats counts the times a scrape asked the actors.
type countedStats struct {
	asked atomic.Int32
	stats []*topic.Stats
}

func (c *countedStats) Stats(string) []*topic.Stats {
	c.asked.Add(1)
	return c.stats
}

// A scrape naming only node-wide or metadata families asks no partition
// or channel actor and answers only those; one naming an actor's family
// asks them; one naming none gathers everything, as before.
func TestScrapeNamingFamiliesGathersOnlyThose(t *testing.T) {
	src := &countedStats{stats: []*topic.Stats{{Topic: "t", Partition: 0, Leader: true, ISR: 3, Replicas: 3, Followers: []string{"n2", "n3"}}}}
	m := New(Options{Node: "n1", Stats: src, Cluster: func(context.Context) (ClusterView, error) {
		return ClusterView{LiveNodes: 3, Partitions: 1}, nil
	}})
	m.Observer().ISRShrunk("t", 0, 1)
	m.ObserveKeepalive(0)
	scrape := func(query string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics"+query, nil))
		if rec.Code != 200 {
			t.Fatalf("/metrics%s: %d %s", query, rec.Code, rec.Body)
		}
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	families := func(body string) map[string]bool {
		out := map[string]bool{}
		for _, line := range strings.Split(body, "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				name, _, _ = strings.Cut(name, " ")
				out[name] = true
			}
		}
		return out
	}

	body := scrape("?name[]=partita_isr_shrinks_total&name[]=partita_cluster_partitions_without_leader&name[]=partita_node_lease_keepalive_gap_seconds")
	if n := src.asked.Load(); n != 0 {
		t.Errorf("a scrape of node-wide and metadata families asked the actors %d times", n)
	}
	got := families(body)
	for _, want := range []string{"partita_isr_shrinks_total", "partita_cluster_partitions_without_leader", "partita_node_lease_keepalive_gap_seconds"} {
		if !got[want] {
			t.Errorf("%s missing from a scrape that named it:\n%s", want, body)
		}
	}
	if len(got) != 3 {
		t.Errorf("a scrape naming 3 families answered %d: %v", len(got), got)
	}
	if !strings.Contains(body, `partita_isr_shrinks_total{node="n1",partition="0",topic="t"} 1`) {
		t.Errorf("the ISR shrink is not in the scrape:\n%s", body)
	}

	body = scrape("?name[]=partita_partition_isr_size")
	if n := src.asked.Load(); n != 1 {
		t.Errorf("a scrape of an actor's family asked the actors %d times, want once", n)
	}
	if !strings.Contains(body, `partita_partition_isr_size{node="n1",partition="0",topic="t"} 3`) {
		t.Errorf("the ISR size is not in the scrape:\n%s", body)
	}

	all := families(scrape(""))
	if n := src.asked.Load(); n != 2 {
		t.Errorf("a full scrape asked the actors %d times in all, want twice", n)
	}
	for _, want := range []string{"partita_isr_shrinks_total", "partita_partition_isr_size", "partita_cluster_live_nodes", "go_goroutines", "process_open_fds", "partita_node_lease_keepalive_gap_seconds"} {
		if !all[want] {
			t.Errorf("%s missing from a full scrape", want)
		}
	}
	// Every family of a full scrape is found by name alone.
	for name := range all {
		if got := families(scrape("?name[]=" + name)); !got[name] || len(got) != 1 {
			t.Errorf("a scrape naming %s answered %v", name, got)
		}
	}
}
