package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// nodeEntry is one node of /nodes.
type nodeEntry struct {
	ID               string `json:"id"`
	BroadcastAddress string `json:"broadcast_address"`
	TCPPort          int    `json:"tcp_port"`
	HTTPPort         int    `json:"http_port"`
	Zone             string `json:"zone"`
	Replicas         int    `json:"replicas"`
	Leading          int    `json:"leading"`
	Draining         bool   `json:"draining"`
	Removable        bool   `json:"removable"`
	Leaving          bool   `json:"leaving"`
}

func (n nodeEntry) tcpAddress() string {
	return net.JoinHostPort(n.BroadcastAddress, strconv.Itoa(n.TCPPort))
}

func (n nodeEntry) httpAddress() string {
	return net.JoinHostPort(n.BroadcastAddress, strconv.Itoa(n.HTTPPort))
}

// partitionState is one partition of /lookup?metainfo=true's replication.
type partitionState struct {
	Partition int    `json:"-"` // the key it is listed under
	Leader    string `json:"leader"`
	Preferred string `json:"preferred"`
	Epoch     int64  `json:"epoch"`
	// A move shows as its target catching up, then in the ISR, while
	// moving_in and moving_out name both until the source left.
	ISR       []string `json:"isr"`
	Catchup   []string `json:"catchup"`
	MovingIn  []string `json:"moving_in"`
	MovingOut []string `json:"moving_out"`
	Replicas  int      `json:"replicas"`
}

// topicInfo is what /lookup?metainfo=true says of a topic.
type topicInfo struct {
	Meta struct {
		PartitionNum int  `json:"partition_num"`
		Replica      int  `json:"replica"`
		Ordered      bool `json:"ordered"`
	} `json:"meta"`
	Replication map[string]partitionState `json:"replication"`
	Partitions  []partitionState          `json:"-"` // by partition number
}

// leaderMoved is the answer to a leader move.
type leaderMoved struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Leader    string `json:"leader"`
	Epoch     int64  `json:"epoch"`
}

func (c *client) nodesList(ctx context.Context) ([]nodeEntry, error) {
	var doc struct {
		Producers []nodeEntry `json:"producers"`
	}
	if err := c.get(ctx, "/nodes", nil, &doc); err != nil {
		return nil, err
	}
	sort.Slice(doc.Producers, func(i, j int) bool { return doc.Producers[i].ID < doc.Producers[j].ID })
	return doc.Producers, nil
}

func (c *client) topic(ctx context.Context, name string) (topicInfo, error) {
	var info topicInfo
	if err := c.get(ctx, "/lookup", url.Values{"topic": {name}, "metainfo": {"true"}}, &info); err != nil {
		return info, err
	}
	for key, st := range info.Replication {
		p, err := strconv.Atoi(key)
		if err != nil {
			continue
		}
		st.Partition = p
		info.Partitions = append(info.Partitions, st)
	}
	sort.Slice(info.Partitions, func(i, j int) bool { return info.Partitions[i].Partition < info.Partitions[j].Partition })
	return info, nil
}

// topics lists the cluster's topics (/topics).
func (c *client) topics(ctx context.Context) ([]string, error) {
	var doc struct {
		Topics []string `json:"topics"`
	}
	if err := c.get(ctx, "/topics", nil, &doc); err != nil {
		return nil, err
	}
	return doc.Topics, nil
}

func (c *client) partition(ctx context.Context, topic string, p int) (partitionState, bool, error) {
	info, err := c.topic(ctx, topic)
	if err != nil {
		return partitionState{}, false, err
	}
	for _, st := range info.Partitions {
		if st.Partition == p {
			return st, true, nil
		}
	}
	return partitionState{}, false, nil
}

func (c *client) createTopic(ctx context.Context, name string, partitions, replicas int, ordered bool) error {
	q := url.Values{"topic": {name}, "partition_num": {strconv.Itoa(partitions)}, "replicator": {strconv.Itoa(replicas)}}
	if ordered {
		q.Set("ordered", "true")
	}
	_, err := c.post(ctx, "/topic/create", q)
	return err
}

func (c *client) expand(ctx context.Context, name string, partitions int) error {
	_, err := c.post(ctx, "/topic/partition/expand", url.Values{"topic": {name}, "partition_num": {strconv.Itoa(partitions)}})
	return err
}

func (c *client) moveLeader(ctx context.Context, topic string, p int, to string) (leaderMoved, error) {
	q := url.Values{"topic": {topic}, "partition": {strconv.Itoa(p)}, "move_leader": {"true"}}
	if to != "" {
		q.Set("move_to", to)
	}
	var m leaderMoved
	body, err := c.post(ctx, "/topic/partition/move", q)
	if err != nil {
		return m, err
	}
	return m, decode(body, &m)
}

func (c *client) moveReplica(ctx context.Context, topic string, p int, from, to string) error {
	_, err := c.post(ctx, "/topic/partition/move", url.Values{"topic": {topic}, "partition": {strconv.Itoa(p)},
		"move_from": {from}, "move_to": {to}})
	return err
}

func (c *client) setReplicas(ctx context.Context, topic string, replicas int) error {
	_, err := c.post(ctx, "/topic/meta/update", url.Values{"topic": {topic}, "replicator": {strconv.Itoa(replicas)}})
	return err
}

func (c *client) drain(ctx context.Context, node string) error {
	_, err := c.post(ctx, "/cluster/node/remove", url.Values{"remove_node": {node}})
	return err
}

// logEnd reads a partition's committed log end, in bytes, from the
// /metrics of the node at hostport; false when that node holds no such
// partition (yet) or does not answer.
func (c *client) logEnd(ctx context.Context, hostport, topic string, p int) (int64, bool) {
	body, err := c.doOn(ctx, hostport, http.MethodGet, "/metrics", nil)
	if err != nil {
		return 0, false
	}
	return logEndOf(bytes.NewReader(body), topic, p)
}

// logEndOf finds partita_partition_log_end_bytes of one partition in a
// Prometheus text exposition.
func logEndOf(r io.Reader, topic string, p int) (int64, bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, false
	}
	fam, ok := families["partita_partition_log_end_bytes"]
	if !ok {
		return 0, false
	}
	want := strconv.Itoa(p)
	for _, m := range fam.GetMetric() {
		var t, part string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "topic":
				t = l.GetValue()
			case "partition":
				part = l.GetValue()
			}
		}
		if t == topic && part == want {
			return int64(m.GetGauge().GetValue()), true
		}
	}
	return 0, false
}
