package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/partitamq/partita/internal/testnode"
)

// --http-admin-allow restricts the endpoints that change state to its
// address ranges; reading and publishing stay open to everyone.
func TestAdminAllowRestrictsStateChanges(t *testing.T) {
	outside := testnode.Start(t, "--http-admin-allow", "10.0.0.0/8,192.168.0.0/16")
	for _, path := range []string{
		"/topic/create?topic=adm", "/topic/delete?topic=adm", "/topic/empty?topic=adm",
		"/topic/pause?topic=adm", "/topic/unpause?topic=adm",
		"/channel/create?topic=adm&channel=c", "/channel/delete?topic=adm&channel=c", "/channel/empty?topic=adm&channel=c",
		"/channel/pause?topic=adm&channel=c", "/channel/unpause?topic=adm&channel=c",
		"/channel/setorder?topic=adm&channel=c&order=true", "/topic/tombstone?topic=adm&node=x",
	} {
		if a := call(t, outside, "POST", path, ""); a.status != http.StatusForbidden || a.body != errBody("FORBIDDEN") {
			t.Errorf("POST %s from outside the range: %d %s, want 403 FORBIDDEN", path, a.status, a.body)
		}
	}
	if a := call(t, outside, "POST", "/pub?topic=adm", "data"); a.status != http.StatusOK {
		t.Errorf("publishing from outside the admin range: %d %s", a.status, a.body)
	}
	if a := call(t, outside, "GET", "/stats?format=json", ""); a.status != http.StatusOK {
		t.Errorf("stats from outside the admin range: %d %s", a.status, a.body)
	}

	inside := testnode.Start(t, "--http-admin-allow", "10.0.0.0/8,127.0.0.0/8")
	for _, path := range []string{"/topic/create?topic=adm", "/channel/create?topic=adm&channel=c", "/topic/pause?topic=adm"} {
		if a := call(t, inside, "POST", path, ""); a.status != http.StatusOK {
			t.Errorf("POST %s from inside the range: %d %s", path, a.status, a.body)
		}
	}
}

// --http-admin-token requires "Authorization: Bearer <token>" on the
// endpoints that change state, /config's PUT among them; with an
// allow-list too, a call must pass both.
func TestAdminTokenRequiredForStateChanges(t *testing.T) {
	n := testnode.Start(t, "--http-admin-token", "s3cret", "--http-admin-allow", "127.0.0.0/8")
	bearer := func(token string) http.Header { return http.Header{"Authorization": {"Bearer " + token}} }
	for _, c := range []struct {
		method, path string
		header       http.Header
	}{
		{"POST", "/topic/create?topic=tok", nil},
		{"POST", "/topic/create?topic=tok", bearer("wrong")},
		{"POST", "/topic/create?topic=tok", http.Header{"Authorization": {"s3cret"}}},
		{"POST", "/channel/create?topic=tok&channel=c", bearer("s3cre")},
		{"PUT", "/config/log_level", nil},
		{"POST", "/channel/setoffset?topic=tok&partition=0&channel=c", nil},
		{"POST", "/channel/ratelimit?topic=tok&channel=c&ratekilobytes=1", nil},
		{"POST", "/channel/setclientlimit?topic=tok&channel=c&ready=1", nil},
		{"POST", "/channel/emptydelayed?topic=tok&channel=c", nil},
		{"POST", "/channel/requeuedelayed?topic=tok&channel=c", nil},
		{"POST", "/channel/update?topic=tok&channel=c&max_attempts=3", nil},
		{"POST", "/channel/redrive?topic=tok&channel=c&partition=0&msgid=1", nil},
	} {
		a := callWith(t, n, c.method, c.path, "debug", c.header)
		if a.status != http.StatusUnauthorized || a.body != errBody("UNAUTHORIZED") || a.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s with %v: %d %s, want 401 UNAUTHORIZED with WWW-Authenticate", c.method, c.path, c.header, a.status, a.body)
		}
	}
	for _, path := range []string{"/topic/create?topic=tok", "/channel/create?topic=tok&channel=c"} {
		if a := callWith(t, n, "POST", path, "", bearer("s3cret")); a.status != http.StatusOK {
			t.Errorf("POST %s with the token: %d %s", path, a.status, a.body)
		}
	}
	if a := callWith(t, n, "PUT", "/config/log_level", "debug", bearer("s3cret")); a.status != http.StatusOK || a.body != "1" {
		t.Errorf("PUT /config/log_level with the token: %d %s, want 200 1", a.status, a.body)
	}
	// Reading and publishing need no token, and the token is not shown.
	for _, c := range []struct{ method, path string }{
		{"POST", "/pub?topic=tok"}, {"GET", "/stats?format=json"}, {"GET", "/config/log_level"},
	} {
		if a := call(t, n, c.method, c.path, "data"); a.status != http.StatusOK {
			t.Errorf("%s %s without the token: %d %s", c.method, c.path, a.status, a.body)
		}
	}
	if a := call(t, n, "GET", "/config/http_admin_token", ""); a.status != http.StatusBadRequest {
		t.Errorf("GET /config/http_admin_token: %d %s, want it hidden", a.status, a.body)
	}

	outside := testnode.Start(t, "--http-admin-token", "s3cret", "--http-admin-allow", "10.0.0.0/8")
	if a := callWith(t, outside, "POST", "/topic/create?topic=tok", "", bearer("s3cret")); a.status != http.StatusForbidden {
		t.Errorf("the token from outside the allowed range: %d %s, want 403", a.status, a.body)
	}
}

// youzan's POST /loglevel/set?loglevel=N sets the level /config shows:
// 0 error, 1 warn, 2 info, 3 and more debug.
func TestYouzanLogLevelSet(t *testing.T) {
	n := testnode.Start(t)
	for _, c := range []struct {
		level string
		want  string // nsqd's number for the level /config shows after
	}{{"3", "1"}, {"4", "1"}, {"1", "3"}, {"0", "4"}, {"2", "2"}} {
		if a := call(t, n, "POST", "/loglevel/set?loglevel="+c.level, ""); a.status != http.StatusOK {
			t.Fatalf("loglevel=%s: %d %s", c.level, a.status, a.body)
		}
		if a := call(t, n, "GET", "/config/log_level", ""); a.body != c.want {
			t.Errorf("after loglevel=%s, /config/log_level is %s, want %s", c.level, a.body, c.want)
		}
	}
	for q, want := range map[string]string{"": "MISSING_ARG_LEVEL", "?loglevel=loud": "BAD_LEVEL_STRING"} {
		if a := call(t, n, "POST", "/loglevel/set"+q, ""); a.status != http.StatusBadRequest || a.body != errBody(want) {
			t.Errorf("POST /loglevel/set%s: %d %s, want 400 %s", q, a.status, a.body, want)
		}
	}
}
