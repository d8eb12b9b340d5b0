package httpapi_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/internal/testnode"
)

// A publish another node forwards carries its forwarder's deadline
// (docs/faults.md, finding 12): one arriving past it is refused and
// nothing of it is written; one within it is written, and so is one
// without a deadline, as from a node that sends none; a deadline that is
// not one is a bad request and writes nothing either.
func TestForwardedPublishPastItsDeadlineWritesNothing(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=fwd", "", "")
	mustPost(t, n, "/channel/create?topic=fwd&channel=ch", "", "")
	forwarded := func(deadline string) http.Header {
		h := http.Header{broker.ForwardedHeader: {"n9"}}
		if deadline != "" {
			h.Set(broker.DeadlineHeader, deadline)
		}
		return h
	}
	past := strconv.FormatInt(time.Now().Add(-time.Millisecond).UnixNano(), 10)
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)
	for _, c := range []struct {
		path, body string
		header     http.Header
		status     int
		answer     string
	}{
		{"/pub?topic=fwd&partition=0", "late pub", forwarded(past), 503, errBody("FAILED_ON_NOT_WRITABLE")},
		{"/mpub?topic=fwd&partition=0&binary=true", mpubBinaryBody("late mpub 1", "late mpub 2"), forwarded(past), 503, errBody("FAILED_ON_NOT_WRITABLE")},
		{"/pub?topic=fwd&partition=0&defer=1000", "late dpub", forwarded(past), 503, errBody("FAILED_ON_NOT_WRITABLE")},
		{"/pub?topic=fwd&partition=0", "bad deadline", forwarded("soon"), 400, errBody("INVALID_FORWARD_DEADLINE")},
		{"/pub?topic=fwd&partition=0", "negative deadline", forwarded("-5"), 400, errBody("INVALID_FORWARD_DEADLINE")},
		{"/pub?topic=fwd", "client's bad deadline", http.Header{broker.DeadlineHeader: {"1e9"}}, 400, errBody("INVALID_FORWARD_DEADLINE")},
	} {
		a := callWith(t, n, http.MethodPost, c.path, c.body, c.header)
		if a.status != c.status || a.body != c.answer {
			t.Fatalf("POST %s %q: %d %s, want %d %s", c.path, c.body, a.status, a.body, c.status, c.answer)
		}
	}
	if count := topicTotal(t, n, "fwd", messages); count != 0 {
		t.Fatalf("%d messages written by refused publishes", count)
	}

	written := []string{"in time", "in time mpub 1", "in time mpub 2", "no deadline", "client's"}
	for _, c := range []struct {
		path, body string
		header     http.Header
	}{
		{"/pub?topic=fwd&partition=0", written[0], forwarded(future)},
		{"/mpub?topic=fwd&partition=0&binary=true", mpubBinaryBody(written[1], written[2]), forwarded(future)},
		{"/pub?topic=fwd&partition=0", written[3], forwarded("")},
		{"/pub?topic=fwd", written[4], nil},
	} {
		if a := callWith(t, n, http.MethodPost, c.path, c.body, c.header); a.status != 200 || a.body != "OK" {
			t.Fatalf("POST %s: %d %s, want 200 OK", c.path, a.status, a.body)
		}
	}
	if count := topicTotal(t, n, "fwd", messages); count != int64(len(written)) {
		t.Fatalf("%d messages written, want %d", count, len(written))
	}
	var got []string
	testnode.Consume(t, n.TCPAddr(), "fwd", "ch", waitFor, func(body string) { got = append(got, body) }, func() bool { return len(got) == len(written) })
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(written))) {
		t.Fatalf("channel delivered %q, want %q", got, written)
	}
}

func messages(ts topicStats) int64 { return ts.MessageCount }

// A forward names the epoch its forwarder chose the leader in (finding 12's
// other path): once the leadership has gone to another node and come back,
// one that names the earlier leadership is refused and nothing of it is
// written, since the other node may have taken publishes meant to follow
// it; one naming the present leadership is written; an epoch that is not a
// positive number is a bad request.
func TestForwardToAnEarlierLeadershipWritesNothing(t *testing.T) {
	n1 := testnode.Start(t, "--node-id", "n1")
	n2 := testnode.Start(t, "--node-id", "n2", "--etcd-endpoints", etcdOf(t, n1))
	nodes := map[string]*testnode.Node{"n1": n1, "n2": n2}
	mustPost(t, n1, "/topic/create?topic=fwd&partition_num=1&replicator=2", "", "")
	away := moveLeader(t, n1, "fwd", "")
	back := moveLeader(t, n1, "fwd", "&move_from="+away.Leader+"&move_to="+map[string]string{"n1": "n2", "n2": "n1"}[away.Leader])
	leader := nodes[back.Leader]
	forwarded := func(epoch int64) http.Header {
		return http.Header{broker.ForwardedHeader: {"n9"}, broker.EpochHeader: {strconv.FormatInt(epoch, 10)}}
	}
	// Written first, so the node leads by its own role when the refusals
	// below are asked: "not leader" must come from the epoch.
	eventually(t, "a forward naming the present leadership written", func() bool {
		return callWith(t, leader, http.MethodPost, "/pub?topic=fwd&partition=0", "now", forwarded(back.Epoch)).status == http.StatusOK
	}, func() any { return back })
	for _, c := range []struct {
		path, body string
		header     http.Header
		status     int
		answer     string
	}{
		{"/pub?topic=fwd&partition=0", "meant for the earlier leadership", forwarded(away.Epoch - 1), 503, errBody("FAILED_ON_NOT_LEADER")},
		{"/mpub?topic=fwd&partition=0&binary=true", mpubBinaryBody("while the other led 1", "while the other led 2"), forwarded(away.Epoch), 503, errBody("FAILED_ON_NOT_LEADER")},
		{"/pub?topic=fwd&partition=0", "bad epoch", http.Header{broker.ForwardedHeader: {"n9"}, broker.EpochHeader: {"-1"}}, 400, errBody("INVALID_FORWARD_EPOCH")},
	} {
		if a := callWith(t, leader, http.MethodPost, c.path, c.body, c.header); a.status != c.status || a.body != c.answer {
			t.Fatalf("POST %s %q: %d %s, want %d %s", c.path, c.body, a.status, a.body, c.status, c.answer)
		}
	}
	if count := topicTotal(t, leader, "fwd", messages); count != 1 {
		t.Fatalf("%d messages written, want the 1 forward to the present leadership", count)
	}
}
