package cluster

import (
	"encoding/json"
	"net/http"
	"testing"
)

// channelDepth reads a channel's depth from a node's /stats, summed over
// the partitions the node holds; -1 if the channel is not there.
func channelDepth(t *testing.T, hostport, topic, channel string) int64 {
	t.Helper()
	resp, err := http.Get("http://" + hostport + "/stats?format=json&topic=" + topic)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Topics []struct {
			Channels []struct {
				Name  string `json:"channel_name"`
				Depth int64  `json:"depth"`
			} `json:"channels"`
		} `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	depth := int64(-1)
	for _, tp := range doc.Topics {
		for _, ch := range tp.Channels {
			if ch.Name == channel {
				depth = max(depth, 0) + ch.Depth
			}
		}
	}
	return depth
}
