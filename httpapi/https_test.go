package httpapi_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/partitamq/partita/internal/testcert"
	"github.com/partitamq/partita/internal/testnode"
)

// --https-address serves the same API over TLS with the client port's
// certificate, and --tls-min-version bounds the versions it accepts, as
// nsqd's flags do.
func TestHTTPSServesTheAPIFromTheMinimumVersion(t *testing.T) {
	ca := testcert.NewCA(t, "https")
	cert := ca.Issue(t, "node")
	addr := fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t))
	n := testnode.Start(t, "--tls-cert", cert.CertFile, "--tls-key", cert.KeyFile,
		"--https-address", addr, "--tls-min-version", "tls1.3")
	client := func(maxVersion uint16) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MaxVersion: maxVersion}}}
	}
	do := func(c *http.Client, method, path, body string) (int, string, error) {
		req, err := http.NewRequest(method, "https://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	tls13 := client(tls.VersionTLS13)
	if code, body, err := do(tls13, "GET", "/ping", ""); err != nil || code != http.StatusOK || body != "OK" {
		t.Fatalf("GET /ping over TLS 1.3: %d %q %v", code, body, err)
	}
	if code, body, err := do(tls13, "POST", "/pub?topic=secure", "m"); err != nil || code != http.StatusOK {
		t.Fatalf("POST /pub over TLS 1.3: %d %q %v", code, body, err)
	}
	if ch := topicMessages(t, n, "secure"); ch != 1 {
		t.Fatalf("the message published over HTTPS: %d in the topic", ch)
	}
	if _, _, err := do(client(tls.VersionTLS12), "GET", "/ping", ""); err == nil {
		t.Fatal("a TLS 1.2 client was served below --tls-min-version tls1.3")
	}
	// The plain port stays as it was.
	if a := call(t, n, "GET", "/ping", ""); a.status != http.StatusOK {
		t.Fatalf("plain /ping: %d %s", a.status, a.body)
	}
}

// topicMessages is the messages the topic holds, over its partitions.
func topicMessages(t *testing.T, n *testnode.Node, topic string) int64 {
	t.Helper()
	var total int64
	for _, p := range partitionStats(t, n, topic) {
		total += p.MessageCount
	}
	return total
}
