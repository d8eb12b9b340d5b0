package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

func TestChannelEmpty(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=e", "", "")
	mustPost(t, n, "/channel/create?topic=e&channel=ch", "", "")
	mustPost(t, n, "/mpub?topic=e", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10", "OK")

	c := subscribe(t, n, "e", "ch", nil, 5)
	var inFlight []*nsq.Message
	for range 5 {
		inFlight = append(inFlight, c.message())
	}
	waitChannel(t, n, "e", "ch", "5 in flight, 5 queued", func(cs channelStats) bool {
		return cs.InFlightCount == 5 && cs.Depth == 5
	})

	expectV1(t, n, http.MethodPost, "/channel/empty?topic=e&channel=ch", "", http.StatusOK, "")
	waitChannel(t, n, "e", "ch", "nothing in flight or queued", func(cs channelStats) bool {
		return cs.InFlightCount == 0 && cs.Depth == 0 && len(cs.Clients) == 1 && cs.Clients[0].InFlightCount == 0
	})

	// The emptied messages are no longer the client's: FIN fails without
	// closing the connection, and its RDY window is open again.
	c.send(nsq.Finish(inFlight[0].ID))
	if typ, data := c.frame(); typ != nsq.FrameTypeError || !strings.HasPrefix(string(data), "E_FIN_FAILED ") {
		t.Fatalf("FIN of an emptied message: frame %d %q, want E_FIN_FAILED", typ, data)
	}
	mustPost(t, n, "/pub?topic=e", "after empty", "OK")
	if m := c.message(); string(m.Body) != "after empty" {
		t.Fatalf("got %q after empty, want the new message", m.Body)
	}
}

func TestChannelCreateIdempotent(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=i", "", "")
	mustPost(t, n, "/channel/create?topic=i&channel=ch", "", "")
	mustPost(t, n, "/mpub?topic=i", "a\nb\nc", "OK")
	waitChannelDepth(t, n, "i", "ch", 3)

	expectV1(t, n, http.MethodPost, "/channel/create?topic=i&channel=ch", "", http.StatusOK, "")
	var channels struct{ Channels []string }
	getJSON(t, n, "/channels?topic=i", &channels)
	if len(channels.Channels) != 1 || channels.Channels[0] != "ch" {
		t.Fatalf("channels %v after creating ch twice", channels.Channels)
	}
	if cs, _ := channelTotals(t, n, "i", "ch"); cs.Depth != 3 {
		t.Fatalf("creating an existing channel again changed its depth to %d", cs.Depth)
	}
}

// As in nsqd, a topic's first channel gets what was published before it; a
// channel added later starts at the end.
func TestChannelStartPosition(t *testing.T) {
	for _, partitions := range []string{"1", "3"} {
		t.Run("partitions="+partitions, func(t *testing.T) {
			n := testnode.Start(t)
			mustPost(t, n, "/topic/create?topic=s&partition_num="+partitions, "", "")
			mustPost(t, n, "/mpub?topic=s", "1\n2\n3\n4\n5\n6", "OK")
			waitTopicDepth(t, n, "s", 6)

			mustPost(t, n, "/channel/create?topic=s&channel=first", "", "")
			waitChannelDepth(t, n, "s", "first", 6)
			mustPost(t, n, "/channel/create?topic=s&channel=later", "", "")
			waitChannelDepth(t, n, "s", "later", 0)

			mustPost(t, n, "/mpub?topic=s", "7\n8", "OK")
			waitChannelDepth(t, n, "s", "first", 8)
			waitChannelDepth(t, n, "s", "later", 2)
		})
	}
}
