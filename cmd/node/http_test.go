package main

import (
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
