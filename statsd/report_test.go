package statsd

import (
	"slices"
	"strings"
	"testing"

	"github.com/partitamq/partita/internal/memstats"
)

func TestReportSumsLedPartitionsAndCountsSinceTheLastPush(t *testing.T) {
	first := Sample{Partitions: []Partition{
		{Topic: "t", Partition: 0, MessageCount: 10, MessageBytes: 100, Depth: 1,
			Channels: []Channel{{Name: "c", MessageCount: 10, Depth: 1, RequeueCount: 2, Clients: 1}}},
		{Topic: "t", Partition: 1, MessageCount: 5, MessageBytes: 50,
			Channels: []Channel{{Name: "c", MessageCount: 5, Clients: 1}}},
	}}
	second := Sample{Partitions: []Partition{
		{Topic: "t", Partition: 0, MessageCount: 13, MessageBytes: 130, Depth: 2,
			Channels: []Channel{{Name: "c", MessageCount: 13, Depth: 2, InFlight: 1, RequeueCount: 3, Clients: 1}}},
		{Topic: "t", Partition: 1, MessageCount: 7, MessageBytes: 70, Depth: 1,
			Channels: []Channel{{Name: "c", MessageCount: 7, Depth: 1, Clients: 2}}},
		// Led here since the last push: its past is not counted again.
		{Topic: "t", Partition: 2, MessageCount: 1000, MessageBytes: 10000, Depth: 4,
			Channels: []Channel{{Name: "c", MessageCount: 1000, Depth: 4}}},
	}}
	got := Report(first, second, false)
	want := []string{
		"topic.t.message_count:5|c",
		"topic.t.message_bytes:50|c",
		"topic.t.depth:7|g",
		"topic.t.backend_depth:7|g",
		"topic.t.channel.c.message_count:5|c",
		"topic.t.channel.c.depth:7|g",
		"topic.t.channel.c.backend_depth:7|g",
		"topic.t.channel.c.in_flight_count:1|g",
		"topic.t.channel.c.deferred_count:0|g",
		"topic.t.channel.c.requeue_count:1|c",
		"topic.t.channel.c.timeout_count:0|c",
		"topic.t.channel.c.clients:3|g",
	}
	if !slices.Equal(got[:len(want)], want) {
		t.Fatalf("topic lines:\n%s\nwant\n%s", strings.Join(got[:len(want)], "\n"), strings.Join(want, "\n"))
	}
	for _, line := range []string{"partition.t.0.message_count:3|c", "partition.t.1.channel.c.clients:2|g",
		"partition.t.2.message_count:0|c", "partition.t.2.depth:4|g"} {
		if !slices.Contains(got, line) {
			t.Errorf("no %q in %q", line, got)
		}
	}
	if len(got) != 4*len(want) {
		t.Errorf("%d lines, want the topic's and each of three partitions' %d", len(got), len(want))
	}
}

func TestReportCountsACounterThatWentBackFromZero(t *testing.T) {
	prev := Sample{Partitions: []Partition{{Topic: "t", MessageCount: 50}}}
	cur := Sample{Partitions: []Partition{{Topic: "t", MessageCount: 4}}}
	if got := Report(prev, cur, false)[0]; got != "topic.t.message_count:4|c" {
		t.Fatalf("after the partition was emptied: %q", got)
	}
}

func TestReportLeavesOutEphemeralsWhenAsked(t *testing.T) {
	s := Sample{Partitions: []Partition{
		{Topic: "e#ephemeral"},
		{Topic: "t", Channels: []Channel{{Name: "c#ephemeral"}, {Name: "d"}}},
	}}
	for _, exclude := range []bool{false, true} {
		joined := strings.Join(Report(Sample{}, s, exclude), "\n")
		if strings.Contains(joined, "#ephemeral") == exclude {
			t.Errorf("excludeEphemeral %v: %s", exclude, joined)
		}
		if !strings.Contains(joined, "topic.t.channel.d.depth") {
			t.Errorf("excludeEphemeral %v left out a durable channel: %s", exclude, joined)
		}
	}
}

func TestReportMemory(t *testing.T) {
	prev := Sample{Memory: &memstats.Stats{GCTotalRuns: 10}}
	cur := Sample{Memory: &memstats.Stats{GCTotalRuns: 13, HeapObjects: 7}}
	got := Report(prev, cur, false)
	if !slices.Contains(got, "mem.gc_runs:3|c") || !slices.Contains(got, "mem.heap_objects:7|g") || len(got) != 9 {
		t.Fatalf("memory lines %q", got)
	}
}

func TestPacketsBreakBetweenLines(t *testing.T) {
	lines := []string{"a:1|c", "bb:2|g", strings.Repeat("x", 40) + ":3|g", "c:4|c"}
	got := Packets("nsq.h.", lines, 30)
	want := []string{"nsq.h.a:1|c\nnsq.h.bb:2|g\n", "nsq.h." + strings.Repeat("x", 40) + ":3|g\n", "nsq.h.c:4|c\n"}
	if len(got) != len(want) {
		t.Fatalf("%d packets %q, want %q", len(got), got, want)
	}
	for i := range want {
		if string(got[i]) != want[i] {
			t.Errorf("packet %d %q, want %q", i, got[i], want[i])
		}
	}
}

func TestPrefixIsNSQDs(t *testing.T) {
	for _, c := range []struct{ pattern, addr, want string }{
		{"nsq.%s", "10.0.0.1", "nsq.10_0_0_1_4151."},
		{"nsq.%s.", "host.example", "nsq.host_example_4151."},
		{"fixed", "h", "fixed."},
		{"", "h", ""},
	} {
		if got := Prefix(c.pattern, c.addr, 4151); got != c.want {
			t.Errorf("Prefix(%q, %q) = %q, want %q", c.pattern, c.addr, got, c.want)
		}
	}
}
