package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func postHTTP(t *testing.T, hostport, pathAndQuery, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+hostport+pathAndQuery, "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

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

// metric reads one sample's value from a node's /metrics: the first line of
// the named metric whose labels contain match.
func metric(t *testing.T, hostport, name, match string) string {
	t.Helper()
	resp, err := http.Get("http://" + hostport + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, match) {
			fields := strings.Fields(line)
			return fields[len(fields)-1]
		}
	}
	return ""
}
