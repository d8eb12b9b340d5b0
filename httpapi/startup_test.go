package httpapi_test

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/storage"
)

// withNode runs f against a node over dir inside a subtest, so the node is
// closed when f returns and the next node can open the same directory.
func withNode(t *testing.T, name, dir string, f func(t *testing.T, n *testnode.Node)) {
	t.Helper()
	if !t.Run(name, func(t *testing.T) { f(t, testnode.StartIn(t, dir)) }) {
		t.FailNow()
	}
}

func TestStartup(t *testing.T) {
	dir := t.TempDir()
	withNode(t, "before", dir, func(t *testing.T, n *testnode.Node) {
		mustPost(t, n, "/topic/create?topic=one&partition_num=2", "", "")
		mustPost(t, n, "/channel/create?topic=one&channel=a", "", "")
		mustPost(t, n, "/channel/create?topic=one&channel=b", "", "")
		mustPost(t, n, "/mpub?topic=one", "1\n2\n3\n4", "OK")
		mustPost(t, n, "/pub?topic=two", "waiting for a channel", "OK")
		mustPost(t, n, "/topic/pause?topic=two", "", "")
		mustPost(t, n, "/topic/create?topic="+url.QueryEscape("gone#ephemeral"), "", "")
		mustPost(t, n, "/channel/create?topic=one&channel="+url.QueryEscape("gone#ephemeral"), "", "")
		waitChannelDepth(t, n, "one", "a", 4)
	})
	withNode(t, "after", dir, func(t *testing.T, n *testnode.Node) {
		var topics struct{ Topics []string }
		getJSON(t, n, "/topics", &topics)
		if want := []string{"one", "two"}; !slices.Equal(topics.Topics, want) {
			t.Fatalf("topics after restart %v, want %v", topics.Topics, want)
		}
		var channels struct{ Channels []string }
		getJSON(t, n, "/channels?topic=one", &channels)
		if want := []string{"a", "b"}; !slices.Equal(channels.Channels, want) {
			t.Fatalf("channels after restart %v, want %v", channels.Channels, want)
		}
		if parts := partitionStats(t, n, "one"); len(parts) != 2 {
			t.Fatalf("topic one has %d partitions after restart, want 2", len(parts))
		}
		waitChannelDepth(t, n, "one", "a", 4)
		waitChannelDepth(t, n, "one", "b", 4)
		c := subscribe(t, n, "one", "a", nil, 10)
		var bodies []string
		for range 4 {
			bodies = append(bodies, string(c.message().Body))
		}
		slices.Sort(bodies)
		if want := []string{"1", "2", "3", "4"}; !slices.Equal(bodies, want) {
			t.Fatalf("delivered after restart %v, want %v", bodies, want)
		}

		two := partitionStats(t, n, "two")
		if len(two) != 1 || !two[0].Paused || two[0].Depth != 1 {
			t.Fatalf("topic two after restart: %+v, want one paused partition with depth 1", two)
		}
	})
}

func TestPauseMetadata(t *testing.T) {
	dir := t.TempDir()
	withNode(t, "create", dir, func(t *testing.T, n *testnode.Node) {
		mustPost(t, n, "/topic/create?topic=p&partition_num=2", "", "")
		mustPost(t, n, "/channel/create?topic=p&channel=ch", "", "")
	})
	for i, step := range []struct {
		action string
		paused bool
	}{
		{"pause", true},
		{"unpause", false},
		{"pause", true},
	} {
		withNode(t, fmt.Sprintf("%d %s", i, step.action), dir, func(t *testing.T, n *testnode.Node) {
			mustPost(t, n, "/channel/"+step.action+"?topic=p&channel=ch", "", "")
			mustPost(t, n, "/topic/"+step.action+"?topic=p", "", "")
		})
		withNode(t, fmt.Sprintf("%d restarted", i), dir, func(t *testing.T, n *testnode.Node) {
			for _, ts := range partitionStats(t, n, "p") {
				if ts.Paused != step.paused {
					t.Fatalf("topic partition %s paused %v, want %v", ts.TopicPartition, ts.Paused, step.paused)
				}
				if len(ts.Channels) != 1 || ts.Channels[0].Paused != step.paused {
					t.Fatalf("channel on partition %s: %+v, want paused %v", ts.TopicPartition, ts.Channels, step.paused)
				}
			}
		})
	}
}

// A channel's state file keeps the pause it was last saved with; a change
// acknowledged just before a shutdown may not have reached it. The
// cluster's metadata decides at the next start, either way.
func TestPauseAtStartIsTheMetadatas(t *testing.T) {
	dir := t.TempDir()
	withNode(t, "create", dir, func(t *testing.T, n *testnode.Node) {
		mustPost(t, n, "/topic/create?topic=p&partition_num=2", "", "")
		mustPost(t, n, "/channel/create?topic=p&channel=ch", "", "")
	})
	states, err := filepath.Glob(filepath.Join(dir, "topics", "p", "*", "channels", "ch.state"))
	if err != nil || len(states) != 2 {
		t.Fatalf("state files of channel ch: %v %v, want one per partition", states, err)
	}
	for _, path := range states {
		pdir := filepath.Dir(filepath.Dir(path))
		st, found, err := storage.LoadChannelState(pdir, "ch")
		if err != nil || !found {
			t.Fatalf("loading %s: %v %v", path, found, err)
		}
		st.Paused = true
		if err := storage.SaveChannelState(pdir, "ch", st); err != nil {
			t.Fatal(err)
		}
	}
	withNode(t, "restarted", dir, func(t *testing.T, n *testnode.Node) {
		for _, ts := range partitionStats(t, n, "p") {
			if len(ts.Channels) != 1 || ts.Channels[0].Paused {
				t.Fatalf("channel on partition %s: %+v, want it unpaused as the metadata has it", ts.TopicPartition, ts.Channels)
			}
		}
	})
}
