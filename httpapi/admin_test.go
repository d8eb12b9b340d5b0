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
