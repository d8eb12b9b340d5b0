package metrics

import (
	"testing"
	"time"

	"github.com/partitamq/partita/actors/topic"
)

// series counts the series of a family in the registry; value is the
// first one's counter or gauge value.
func series(t *testing.T, m *Metrics, name string) (n int, value float64) {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
		for i, s := range mf.GetMetric() {
			if i == 0 {
				value = s.GetCounter().GetValue() + s.GetGauge().GetValue()
			}
		}
		return len(mf.GetMetric()), value
	}
	return 0, 0
}

type fixedStats struct{ stats []*topic.Stats }

func (f *fixedStats) Stats(string) []*topic.Stats { return f.stats }

// A hosted partition's event series exist at zero from the first scrape,
// and go away with the partition.
func TestPartitionSeriesPrecreatedAndForgotten(t *testing.T) {
	src := &fixedStats{stats: []*topic.Stats{{Topic: "t", Partition: 0, Leader: true, ISR: 2, Replicas: 3, Followers: []string{"n2", "n3"}}}}
	m := New(Options{Node: "n1", Stats: src})
	for name, want := range map[string]int{
		"partita_publish_latency_seconds":       1,
		"partita_commit_latency_seconds":        1,
		"partita_replica_ack_latency_seconds":   2,
		"partita_replica_catchup_records_total": 2,
		"partita_replica_catchup_bytes_total":   2,
		"partita_isr_shrinks_total":             1,
		"partita_isr_expands_total":             1,
		"partita_leader_elections_total":        1,
		"partita_partition_under_replicated":    1,
	} {
		if got, _ := series(t, m, name); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
	m.Observer().ISRShrunk("t", 0, 1)
	m.Observer().Committed("t", 0, 3, time.Millisecond)
	if _, v := series(t, m, "partita_isr_shrinks_total"); v != 1 {
		t.Errorf("isr shrinks %v after one shrink", v)
	}
	m.Observer().CatchUpSent("t", 0, "n2", 256, 40960)
	_, records := series(t, m, "partita_replica_catchup_records_total")
	_, bytes := series(t, m, "partita_replica_catchup_bytes_total")
	if records != 256 || bytes != 40960 {
		t.Errorf("catch-up to n2: %v records and %v bytes after a chunk of 256 and 40960", records, bytes)
	}
	src.stats = nil
	for _, name := range []string{"partita_publish_latency_seconds", "partita_replica_ack_latency_seconds", "partita_isr_shrinks_total", "partita_replica_catchup_bytes_total"} {
		if got, _ := series(t, m, name); got != 0 {
			t.Errorf("%s: %d series after the partition went away", name, got)
		}
	}
}

// The node's catch-up rate limit is exported as it was configured.
func TestCatchupRateLimitExported(t *testing.T) {
	m := New(Options{Node: "n1", Stats: &fixedStats{}, CatchupRateLimit: 1 << 20})
	if n, v := series(t, m, "partita_catchup_rate_limit_bytes"); n != 1 || v != 1<<20 {
		t.Fatalf("%d series of partita_catchup_rate_limit_bytes, value %v; want one of %d", n, v, 1<<20)
	}
}

// The actor middleware counts a message as queued until it is processed.
func TestMailboxCounter(t *testing.T) {
	m := New(Options{Node: "n1", Stats: &fixedStats{}})
	c := mailboxCounter{m.actors.queued.WithLabelValues("channel")}
	c.MessagePosted(1)
	c.MessagePosted(2)
	c.MessageReceived(1)
	if _, v := series(t, m, "partita_actor_mailbox_messages"); v != 1 {
		t.Fatalf("queued %v, want 1", v)
	}
}
