package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// max_attempts on one node: /channel/create sets it, /channel/update
// changes it (and refuses what is no count, or a channel that does not
// exist), and on an ordered channel a message REQ'd on its last delivery
// goes to <topic>.dead with its origin in its header, and the next is
// delivered.
func TestChannelMaxAttemptsOnOneNode(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=d", "", "")
	mustPost(t, n, "/channel/create?topic=d&channel=ch&max_attempts=3", "", "")
	mustPost(t, n, "/channel/setorder?topic=d&channel=ch&order=true", "", "")
	waitChannel(t, n, "d", "ch", "max_attempts 3", func(cs channelStats) bool { return cs.MaxAttempts == 3 })
	for _, q := range []string{"max_attempts=x", "max_attempts=-1", "max_attempts=65536"} {
		expectV1(t, n, http.MethodPost, "/channel/update?topic=d&channel=ch&"+q, "", http.StatusBadRequest, errBody("INVALID_ARG_MAX_ATTEMPTS"))
	}
	expectV1(t, n, http.MethodPost, "/channel/update?topic=d&channel=none&max_attempts=2", "", http.StatusNotFound, errBody("CHANNEL_NOT_FOUND"))
	expectV1(t, n, http.MethodPost, "/channel/update?topic=d&channel=ch", "", http.StatusBadRequest, errBody("MISSING_ARG_MAX_ATTEMPTS"))
	mustPost(t, n, "/channel/update?topic=d&channel=ch&max_attempts=2", "", "")
	waitChannel(t, n, "d", "ch", "max_attempts 2", func(cs channelStats) bool { return cs.MaxAttempts == 2 })

	mustPost(t, n, "/mpub?topic=d", "bad\ngood", "OK")
	c := subscribe(t, n, "d", "ch", nil, 2)
	for attempt := uint16(1); attempt <= 2; attempt++ {
		m := c.message()
		if string(m.Body) != "bad" || m.Attempts != attempt {
			t.Fatalf("delivery %d: %q attempts %d", attempt, m.Body, m.Attempts)
		}
		c.send(nsq.Requeue(m.ID, 0))
	}
	if m := c.message(); string(m.Body) != "good" {
		t.Fatalf("after the dead message: %q", m.Body)
	}
	waitChannel(t, n, "d", "ch", "one dead letter", func(cs channelStats) bool { return cs.DeadLettered == 1 })

	var got struct {
		Body string `json:"body"`
		Ext  string `json:"ext"`
	}
	getJSON(t, n, "/message/get?topic=d.dead&partition=0&search_mode=count&search_pos=0", &got)
	var h map[string]string
	if err := json.Unmarshal([]byte(got.Ext), &h); err != nil || got.Body != "bad" ||
		h["##origin_topic"] != "d" || h["##origin_channel"] != "ch" || h["##origin_attempts"] != "2" {
		t.Fatalf("dead letter %+v (%v)", got, err)
	}
	var where struct {
		Channels []struct {
			State      string `json:"state"`
			DeadLetter *struct {
				Topic string `json:"topic"`
			} `json:"dead_letter"`
		} `json:"channels"`
	}
	getJSON(t, n, "/message/get?topic=d&partition=0&search_mode=id&search_pos="+h["##origin_msg_id"], &where)
	if len(where.Channels) != 1 || where.Channels[0].State != "confirmed" || where.Channels[0].DeadLetter == nil || where.Channels[0].DeadLetter.Topic != "d.dead" {
		t.Fatalf("/message/get of the dead-lettered message: %+v", where)
	}
}

// --max-attempts is the max_attempts of a channel created without one,
// by a SUB as by /channel/create; a topic whose <topic>.dead could not be
// a topic takes none, asked for or by default.
func TestMaxAttemptsFlagIsTheDefault(t *testing.T) {
	n := testnode.Start(t, "--max-attempts", "4")
	mustPost(t, n, "/topic/create?topic=f", "", "")
	subscribe(t, n, "f", "sub", nil, 1)
	mustPost(t, n, "/channel/create?topic=f&channel=made", "", "")
	mustPost(t, n, "/channel/create?topic=f&channel=off&max_attempts=0", "", "")
	for ch, want := range map[string]int{"sub": 4, "made": 4, "off": 0} {
		waitChannel(t, n, "f", ch, "its max_attempts", func(cs channelStats) bool { return cs.MaxAttempts == want })
	}
	long := strings.Repeat("t", 62)
	mustPost(t, n, "/topic/create?topic="+long, "", "")
	expectV1(t, n, http.MethodPost, "/channel/create?topic="+long+"&channel=c&max_attempts=2", "", http.StatusBadRequest, errBody("INVALID_DEAD_LETTER_TOPIC"))
	mustPost(t, n, "/channel/create?topic="+long+"&channel=c", "", "")
	mustPost(t, n, "/pub?topic="+long, "m", "OK")
	waitChannelDepth(t, n, long, "c", 1)
	if cs, _ := channelTotals(t, n, long, "c"); cs.MaxAttempts != 0 {
		t.Fatalf("a channel of a topic without a dead-letter topic took max_attempts %d", cs.MaxAttempts)
	}
}

// /channel/redrive gives a dead letter back to the channel it came from:
// a copy in the origin partition only that channel delivers, at once, its
// attempts counted afresh, its own header kept and the origin keys gone;
// another channel of the topic does not see it again. A message that is
// not a dead letter of the channel named, or none at all, is refused.
func TestRedriveGivesADeadLetterBackToItsChannel(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=r&extend=true", "", "")
	mustPost(t, n, "/channel/create?topic=r&channel=other", "", "")
	c, m, dead := deadOnce(t, n, "r", `{"k":"v"}`)

	expectV1(t, n, http.MethodPost, "/channel/redrive?topic=r&channel=other&partition=0&msgid="+dead.ID, "", http.StatusBadRequest, errBody("NOT_A_DEAD_LETTER_OF_THE_CHANNEL"))
	expectV1(t, n, http.MethodPost, "/channel/redrive?topic=r&channel=ch&partition=0&msgid=12345", "", http.StatusNotFound, errBody("MESSAGE_NOT_FOUND"))
	expectV1(t, n, http.MethodPost, "/channel/redrive?topic=r&channel=ch&partition=0&msgid="+dead.ID, "", http.StatusOK, `{"topic":"r","partition":0,"channel":"ch"}`)
	again := c.message()
	if string(again.Body) != "bad" || again.Attempts != 1 || again.ID == m.ID {
		t.Fatalf("redriven: %q attempts %d ID %x (was %x)", again.Body, again.Attempts, again.ID, m.ID)
	}
	var copied struct {
		Ext     string `json:"ext"`
		Channel string `json:"delayed_channel"`
	}
	getJSON(t, n, "/message/get?topic=r&partition=0&search_mode=count&search_pos=1", &copied)
	if copied.Ext != `{"k":"v"}` || copied.Channel != "ch" {
		t.Fatalf("the copy: %+v", copied)
	}
	c.send(nsq.Finish(again.ID))
	waitChannelDepth(t, n, "r", "other", 1) // the original only
}

// A dead letter keeps the message's ##msg_id: with a dedupe window on
// <topic>.dead, a message dead again after a redrive is confirmed on its
// channel and not written there a second time.
func TestDeadLetterKeepsItsMsgIDForTheDedupeWindow(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=u&extend=true", "", "")
	mustPost(t, n, "/topic/create?topic=u.dead&extend=true&dedupe_window=1m", "", "")
	c, _, dead := deadOnce(t, n, "u", `{"%23%23msg_id":"k1"}`)
	if !strings.Contains(dead.Ext, `"##msg_id":"k1"`) {
		t.Fatalf("the dead letter's header %s", dead.Ext)
	}
	mustPost(t, n, "/channel/redrive?topic=u&channel=ch&partition=0&msgid="+dead.ID, "", `{"topic":"u","partition":0,"channel":"ch"}`)
	c.send(nsq.Requeue(c.message().ID, 0))
	waitChannel(t, n, "u", "ch", "dead again, confirmed", func(cs channelStats) bool { return cs.DeadLettered == 2 && cs.Depth == 0 })
	if d := topicDepth(t, n, "u.dead"); d != 1 {
		t.Fatalf("u.dead holds %d, want the one dead letter", d)
	}
}

// deadOnce makes channel ch of the ext topic topic take one delivery, has
// a message with the header ext (query-escaped) published and REQ'd by
// its consumer c, and returns c, the message and the dead letter it became.
func deadOnce(t *testing.T, n *testnode.Node, topic, ext string) (*rawConsumer, *nsq.Message, deadLetterDoc) {
	t.Helper()
	mustPost(t, n, "/channel/create?topic="+topic+"&channel=ch&max_attempts=1", "", "")
	mustPost(t, n, "/pub_ext?topic="+topic+"&ext="+ext, "bad", "OK")
	c := subscribe(t, n, topic, "ch", nil, 1)
	m := c.message()
	c.send(nsq.Requeue(m.ID, 0))
	waitChannel(t, n, topic, "ch", "the dead letter", func(cs channelStats) bool { return cs.DeadLettered == 1 })
	var dead deadLetterDoc
	getJSON(t, n, "/message/get?topic="+topic+".dead&partition=0&search_mode=count&search_pos=0", &dead)
	return c, m, dead
}

// deadLetterDoc is what a test reads of a dead letter's /message/get.
type deadLetterDoc struct {
	ID  string `json:"id"`
	Ext string `json:"ext"`
}

// The dedupe window on <topic>.dead tells apart the channels a message
// died on: two channels giving up on the same message each have their
// dead letter written, one naming each, or the second channel confirms
// the message with nothing in <topic>.dead to redrive it from.
func TestDeadLettersOfTwoChannelsAreBothWritten(t *testing.T) {
	n := testnode.Start(t)
	mustPost(t, n, "/topic/create?topic=w&extend=true", "", "")
	mustPost(t, n, "/topic/create?topic=w.dead&extend=true&dedupe_window=1m", "", "")
	for _, ch := range []string{"a", "b"} {
		mustPost(t, n, "/channel/create?topic=w&channel="+ch+"&max_attempts=1", "", "")
	}
	mustPost(t, n, `/pub_ext?topic=w&ext={"%23%23msg_id":"k1"}`, "bad", "OK")
	for _, ch := range []string{"a", "b"} {
		c := subscribe(t, n, "w", ch, nil, 1)
		c.send(nsq.Requeue(c.message().ID, 0))
		waitChannel(t, n, "w", ch, "one dead letter", func(cs channelStats) bool { return cs.DeadLettered == 1 && cs.Depth == 0 })
	}
	if d := topicDepth(t, n, "w.dead"); d != 2 {
		t.Fatalf("w.dead holds %d, want a dead letter from each channel", d)
	}
}
