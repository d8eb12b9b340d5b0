package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
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
	v, err := metricValue(hostport, name, match)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricValue is metric for a node that may not answer: "" when no line
// matches, an error when /metrics cannot be read.
func metricValue(hostport, name, match string) (string, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + hostport + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, match) {
			fields := strings.Fields(line)
			return fields[len(fields)-1], nil
		}
	}
	return "", nil
}
