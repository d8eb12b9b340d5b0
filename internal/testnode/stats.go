package testnode

import (
	"encoding/json"
	"testing"
)

// TopicStats is one partition of a topic as a node's /stats?format=json
// shows it.
type TopicStats struct {
	Name      string         `json:"topic_name"`
	Partition string         `json:"topic_partition"`
	IsLeader  bool           `json:"is_leader"`
	Channels  []ChannelStats `json:"channels"`
}

// ChannelStats is one channel of a partition in /stats: the fields tests
// count by, and every field as the node sent it.
type ChannelStats struct {
	Name            string
	Depth, InFlight int
	Fields          map[string]json.RawMessage
}

func (c *ChannelStats) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &c.Fields); err != nil {
		return err
	}
	var known struct {
		Name     string `json:"channel_name"`
		Depth    int    `json:"depth"`
		InFlight int    `json:"in_flight_count"`
	}
	if err := json.Unmarshal(b, &known); err != nil {
		return err
	}
	c.Name, c.Depth, c.InFlight = known.Name, known.Depth, known.InFlight
	return nil
}

// Stats reads the partitions of topic that the node at hostport holds.
func Stats(t testing.TB, hostport, topic string) []TopicStats {
	t.Helper()
	code, body := Get(t, hostport, "/stats?format=json&topic="+topic)
	if code != 200 {
		t.Fatalf("/stats: %d %s", code, body)
	}
	var doc struct {
		Topics []TopicStats `json:"topics"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("/stats: %v in %s", err, body)
	}
	return doc.Topics
}
