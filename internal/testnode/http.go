package testnode

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Post POSTs body to the HTTP API at hostport and returns status and body.
func Post(t testing.TB, hostport, pathAndQuery, body string) (int, string) {
	t.Helper()
	return answer(t)(http.Post("http://"+hostport+pathAndQuery, "application/octet-stream", strings.NewReader(body)))
}

// Get GETs from the HTTP API at hostport and returns status and body.
func Get(t testing.TB, hostport, pathAndQuery string) (int, string) {
	t.Helper()
	return answer(t)(http.Get("http://" + hostport + pathAndQuery))
}

// answer reads a response's status and body, failing t on no response.
func answer(t testing.TB) func(*http.Response, error) (int, string) {
	return func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// Metric reads one sample's value from a node's /metrics: the first line of
// the named metric whose labels contain match.
func Metric(t testing.TB, hostport, name, match string) string {
	t.Helper()
	v, err := MetricValue(hostport, name, match)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// MetricValue is Metric for a node that may not answer: "" when no line
// matches, an error when /metrics cannot be read.
func MetricValue(hostport, name, match string) (string, error) {
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
