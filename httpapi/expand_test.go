package httpapi_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/testnode"
)

// /topic/partition/expand on one node: youzan's parameters and refusals,
// then a topic grown from 2 to 4 partitions that /lookup lists, that takes
// publishes on the new ones, and whose consumer subscribed before the
// expand receives them, from the new partitions' first message.
func TestTopicPartitionExpand(t *testing.T) {
	n := testnode.Start(t)
	expectV1(t, n, http.MethodPost, "/topic/partition/expand?topic=ex&partition_num=4", "", http.StatusNotFound, errBody("TOPIC_NOT_FOUND"))
	mustPost(t, n, "/topic/create?topic=ex&partition_num=2", "", "")
	mustPost(t, n, "/channel/create?topic=ex&channel=c", "", "")
	c := subscribe(t, n, "ex", "c", nil, 10)
	for _, refused := range []struct{ query, code string }{
		{"topic=ex", "MISSING_ARG_TOPIC_PARTITION_NUM"},
		{"topic=ex&partition_num=x", "INVALID_ARG_TOPIC_PARTITION_NUM"},
		{"topic=ex&partition_num=1025", "INVALID_ARG_TOPIC_PARTITION_NUM"},
		{"topic=ex&partition_num=1", "the partition number can not be reduced"},
		{"topic=ex&partition_num=2", "the topic already has that many partitions"},
	} {
		expectV1(t, n, http.MethodPost, "/topic/partition/expand?"+refused.query, "", http.StatusBadRequest, errBody(refused.code))
	}
	expectV1(t, n, http.MethodGet, "/topic/partition/expand?topic=ex&partition_num=4", "", http.StatusMethodNotAllowed, errBody("METHOD_NOT_ALLOWED"))

	mustPost(t, n, "/topic/partition/expand?topic=ex&partition_num=4", "", "")
	var doc struct {
		Partitions map[string]any `json:"partitions"`
		Meta       struct {
			PartitionNum int `json:"partition_num"`
		} `json:"meta"`
	}
	eventually(t, "/lookup to list four partitions", func() bool {
		getJSON(t, n, "/lookup?metainfo=true&topic=ex", &doc)
		return len(doc.Partitions) == 4 && doc.Meta.PartitionNum == 4
	}, func() any { return doc })
	eventually(t, "partition 3 to take a publish", func() bool {
		status, _ := n.Post(t, "/pub?topic=ex&partition=3", "on-3")
		return status == http.StatusOK
	}, func() any { return nil })
	mustPost(t, n, "/pub?topic=ex&partition=2", "on-2", "OK")
	var got []int32
	for len(got) < 2 {
		m := c.message()
		id, err := strconv.ParseUint(string(m.ID[:]), 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, topic.PartitionOf(id))
		c.send(nsq.Finish(m.ID))
	}
	slices.Sort(got)
	if !slices.Equal(got, []int32{2, 3}) {
		t.Fatalf("the consumer subscribed before the expand got messages of partitions %v, want 2 and 3", got)
	}
}

// An expand of more partitions than one etcd transaction holds stores
// them in several, the topic's count last: the node starts every one.
func TestTopicExpandBeyondOneTransaction(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=wide&partition_num=2", "", "")
	mustPost(t, n, "/topic/partition/expand?topic=wide&partition_num=300", "", "")
	var doc struct {
		Partitions map[string]any `json:"partitions"`
	}
	eventually(t, "/lookup to list 300 partitions", func() bool {
		getJSON(t, n, "/lookup?topic=wide", &doc)
		return len(doc.Partitions) == 300
	}, func() any { return len(doc.Partitions) })
	for _, p := range []string{"2", "150", "299"} {
		eventually(t, "partition "+p+" to take a publish", func() bool {
			status, _ := n.Post(t, "/pub?topic=wide&partition="+p, "x")
			return status == http.StatusOK
		}, func() any { return nil })
	}
}
