package httpapi_test

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

func TestTopicCreatePartitions(t *testing.T) {
	n := testnode.Start(t, "--default-partitions", "2")
	for _, tc := range []struct {
		topic, partitionNum string
		partitions          int
	}{
		{"d", "", 2},
		{"p1", "1", 1},
		{"p4", "4", 4},
	} {
		t.Run(tc.topic, func(t *testing.T) {
			create := "/topic/create?topic=" + tc.topic
			if tc.partitionNum != "" {
				create += "&partition_num=" + tc.partitionNum
			}
			expectV1(t, n, http.MethodPost, create, "", http.StatusOK, "")
			// Creating it again, whatever the count, changes nothing.
			expectV1(t, n, http.MethodPost, create, "", http.StatusOK, "")
			expectV1(t, n, http.MethodPost, "/topic/create?topic="+tc.topic+"&partition_num=7", "", http.StatusOK, "")
			if got := len(partitionStats(t, n, tc.topic)); got != tc.partitions {
				t.Fatalf("%d partitions, want %d", got, tc.partitions)
			}
		})
	}
	for _, tc := range []struct {
		query string
		code  string
	}{
		{"topic=bad&partition_num=-1", "INVALID_ARG_PARTITION_NUM"},
		{"topic=bad&partition_num=1025", "INVALID_ARG_PARTITION_NUM"},
		{"topic=bad&partition_num=three", "INVALID_ARG_PARTITION_NUM"},
		{"partition_num=2", "MISSING_ARG_TOPIC"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			expectV1(t, n, http.MethodPost, "/topic/create?"+tc.query, "", http.StatusBadRequest, errBody(tc.code))
		})
	}
	if got := partitionStats(t, n, "bad"); len(got) != 0 {
		t.Fatalf("a rejected create made the topic: %+v", got)
	}
}

// /stats has one entry per partition, in partition order, and a publish to
// a chosen partition shows up in that partition's entry only.
func TestStatsPartitions(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=sp&partition_num=3", "", "")
	mustPost(t, n, "/pub?topic=sp&partition=1", "one", "OK")
	mustPost(t, n, "/mpub?topic=sp&partition=2", "two\ntwo", "OK")

	entries := partitionStats(t, n, "sp")
	if len(entries) != 3 {
		t.Fatalf("%d entries, want 3: %+v", len(entries), entries)
	}
	for i, e := range entries {
		if e.TopicName != "sp" || e.TopicPartition != strconv.Itoa(i) || !e.IsLeader {
			t.Errorf("entry %d: %+v, want topic_name sp, topic_partition %d, is_leader", i, e, i)
		}
		if want := int64(i); e.MessageCount != want || e.Depth != want {
			t.Errorf("partition %d: message_count %d depth %d, want %d", i, e.MessageCount, e.Depth, want)
		}
	}
}

// Publishing while the topic is deleted over and over: every publish is
// answered, OK or a retryable refusal, and the topic made again afterwards
// works, then and after a restart.
func TestDeleteTopicWhilePublishing(t *testing.T) {
	dir := t.TempDir()
	withNode(t, "racing", dir, func(t *testing.T, n *testnode.Node) {
		racePublishAndDelete(t, n, "race")
		call(t, n, http.MethodPost, "/topic/delete?topic=race", "")
		mustPost(t, n, "/pub?topic=race", "after 1", "OK")
		mustPost(t, n, "/pub?topic=race", "after 2", "OK")
		waitTopicDepth(t, n, "race", 2)
		c := subscribe(t, n, "race", "ch", nil, 2)
		for _, want := range []string{"after 1", "after 2"} {
			if m := c.message(); string(m.Body) != want {
				t.Fatalf("got %q, want %q", m.Body, want)
			}
		}
	})
	withNode(t, "restarted", dir, func(t *testing.T, n *testnode.Node) {
		var topics struct{ Topics []string }
		getJSON(t, n, "/topics", &topics)
		if len(topics.Topics) != 1 || topics.Topics[0] != "race" {
			t.Fatalf("topics after restart %v, want [race]", topics.Topics)
		}
		// Delivered but never finished: both are back.
		waitChannelDepth(t, n, "race", "ch", 2)
	})
}

// racePublishAndDelete publishes to topic from a few goroutines while
// deleting it again and again, and fails on any answer a client could not
// act on, or none.
func racePublishAndDelete(t *testing.T, n *testnode.Node, topic string) {
	transport := &http.Transport{}
	client := &http.Client{Transport: transport, Timeout: waitFor}
	defer transport.CloseIdleConnections()

	stop := make(chan struct{})
	answers := make(chan string, 4)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Post(n.URL("/pub?topic="+topic), "", strings.NewReader("m"))
				if err != nil {
					answers <- err.Error()
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch got := resp.Status + " " + string(body); got {
				case "200 OK OK",
					"503 Service Unavailable " + errBody("EXITING"),
					// accepted, then refused as the partition stopped
					"503 Service Unavailable " + errBody("FAILED_ON_NOT_WRITABLE"):
				default:
					answers <- got
					return
				}
			}
		}()
	}
	for range 100 {
		a := call(t, n, http.MethodPost, "/topic/delete?topic="+topic, "")
		if a.status != http.StatusOK && a.body != errBody("TOPIC_NOT_FOUND") {
			t.Errorf("delete: %d %s", a.status, a.body)
		}
	}
	close(stop)
	wg.Wait()
	close(answers)
	for a := range answers {
		t.Errorf("publish during delete answered %s", a)
	}
}
