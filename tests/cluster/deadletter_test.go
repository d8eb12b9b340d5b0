package cluster

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// poisonLog is what a poisonConsumer saw: every delivery's attempts of
// each failing body, and the other bodies in the order they came.
type poisonLog struct {
	mu       sync.Mutex
	attempts map[string][]uint16
	good     []string
}

func (l *poisonLog) saw(body string) []uint16 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.attempts[body])
}

func (l *poisonLog) goods() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.good)
}

// consumePoison consumes topic/channel through the lookups with go-nsq,
// one message in flight, failing every message whose body starts with
// "bad": go-nsq REQs it. Its own attempt limit and its backoff are off, so
// the node's max_attempts alone decides; hold, if set, runs before a
// failure is answered.
func consumePoison(t *testing.T, lookups []string, topic, channel string, hold func(body string, attempts uint16)) *poisonLog {
	t.Helper()
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 1
	cfg.MaxAttempts = 0
	cfg.MaxBackoffDuration = 0
	cfg.DefaultRequeueDelay = 0
	cfg.LookupdPollInterval = 500 * time.Millisecond
	cons, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cons.SetLogger(nil, nsq.LogLevelError) // the handler's failures are the point
	l := &poisonLog{attempts: map[string][]uint16{}}
	cons.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		body := string(m.Body)
		if !strings.HasPrefix(body, "bad") {
			l.mu.Lock()
			l.good = append(l.good, body)
			l.mu.Unlock()
			return nil
		}
		l.mu.Lock()
		l.attempts[body] = append(l.attempts[body], m.Attempts)
		l.mu.Unlock()
		if hold != nil {
			hold(body, m.Attempts)
		}
		return fmt.Errorf("%s fails", body)
	}))
	if err := cons.ConnectToNSQLookupds(lookups); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cons.Stop(); <-cons.StopChan })
	return l
}

// deadLetter is one message of a dead-letter topic as /message/get shows
// it: its body and its header's keys.
type deadLetter struct {
	Body   string
	Header map[string]string
}

// deadLetterAt reads the message at count n of partition 0 of topic on any
// node holding it, within 15 s.
func (c *testCluster) deadLetterAt(topic string, n int) deadLetter {
	c.t.Helper()
	var dl deadLetter
	testnode.Eventually(c.t, 15*time.Second, fmt.Sprintf("message %d of %s", n, topic), func() bool {
		for _, node := range c.nodes {
			// Not testnode.Get: a killed node does not answer.
			resp, err := http.Get(fmt.Sprintf("http://%s/message/get?topic=%s&partition=0&search_mode=count&search_pos=%d", node.HTTP, topic, n))
			if err != nil {
				continue
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := string(raw)
			if resp.StatusCode != 200 {
				continue
			}
			var m struct {
				Body string `json:"body"`
				Ext  string `json:"ext"`
			}
			if json.Unmarshal([]byte(body), &m) != nil || json.Unmarshal([]byte(m.Ext), &dl.Header) != nil {
				c.t.Fatalf("/message/get of %s: %s", topic, body)
			}
			dl.Body = m.Body
			return true
		}
		return false
	})
	return dl
}

// checkOrigin checks a dead letter's header names where it came from.
func checkOrigin(t *testing.T, dl deadLetter, topic, channel string, attempts int) {
	t.Helper()
	h := dl.Header
	if h["##origin_topic"] != topic || h["##origin_partition"] != "0" || h["##origin_channel"] != channel ||
		h["##origin_attempts"] != fmt.Sprint(attempts) || len(h["##origin_msg_id"]) != 16 {
		t.Fatalf("dead letter %q: header %v", dl.Body, h)
	}
	if at, err := time.Parse(time.RFC3339Nano, h["##origin_requeued_at"]); err != nil || time.Since(at) > time.Minute {
		t.Fatalf("dead letter %q: requeued at %q (%v)", dl.Body, h["##origin_requeued_at"], err)
	}
}

// createPoisoned makes topic with one partition on three replicas and its
// ordered channel ch with max_attempts 3.
func (c *testCluster) createPoisoned(topic string) {
	c.t.Helper()
	c.createTopic(topic, 3)
	n1 := c.nodes["n1"].HTTP
	for _, q := range []string{
		"/channel/create?topic=" + topic + "&channel=ch&max_attempts=3",
		"/channel/setorder?topic=" + topic + "&channel=ch&order=true",
	} {
		if code, body := testnode.Post(c.t, n1, q, ""); code != 200 {
			c.t.Fatalf("%s: %d %s", q, code, body)
		}
	}
}

// A handler that always fails one message of an ordered channel with
// max_attempts 3: the message is delivered three times, then published to
// <topic>.dead (made on first use) with a header naming its origin, and
// the messages behind it are delivered; a plain go-nsq consumer of the
// dead-letter topic gets it; /stats counts it, /message/get says where it
// went.
func TestPoisonMessageGoesToTheDeadLetterTopic(t *testing.T) {
	c := startCluster(t, 3)
	c.createPoisoned("poison")
	leader := c.nodes[c.state("poison", 0).Leader]
	p := producer(t, leader.TCP)
	for _, body := range []string{"bad", "good1", "good2"} {
		if err := p.Publish("poison", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	l := consumePoison(t, c.lookups(), "poison", "ch", nil)
	testnode.Eventually(t, 15*time.Second, "the messages behind the poison one", func() bool {
		return len(l.goods()) == 2
	})
	if got := l.saw("bad"); !slices.Equal(got, []uint16{1, 2, 3}) {
		t.Fatalf("the poison message's deliveries had attempts %v, want 1 2 3", got)
	}
	if got := l.goods(); !slices.Equal(got, []string{"good1", "good2"}) {
		t.Fatalf("after the poison message: %v", got)
	}
	dl := c.deadLetterAt("poison.dead", 0)
	if dl.Body != "bad" {
		t.Fatalf("dead letter %q", dl.Body)
	}
	checkOrigin(t, dl, "poison", "ch", 3)

	var dead []string
	var mu sync.Mutex
	testnode.Consume(t, leaderTCPOf(t, c, "poison.dead"), "poison.dead", "dl", 15*time.Second,
		func(body string) { mu.Lock(); dead = append(dead, body); mu.Unlock() },
		func() bool { return len(dead) >= 1 })
	if !slices.Equal(dead, []string{"bad"}) {
		t.Fatalf("the dead-letter topic's consumer got %v", dead)
	}

	code, stats := testnode.Get(t, leader.HTTP, "/stats?format=json&topic=poison&channel=ch")
	if code != 200 || !strings.Contains(stats, `"dead_lettered_count":1`) || !strings.Contains(stats, `"max_attempts":3`) {
		t.Fatalf("/stats: %d %s", code, stats)
	}
	id := dl.Header["##origin_msg_id"]
	code, where := testnode.Get(t, leader.HTTP, "/message/get?topic=poison&partition=0&search_mode=id&search_pos="+id)
	if code != 200 || !strings.Contains(where, `"dead_letter":{"topic":"poison.dead","partition":0`) {
		t.Fatalf("/message/get of the poison message: %d %s", code, where)
	}
}

// leaderTCPOf is the TCP address of partition 0's leader of topic, within
// 15 s.
func leaderTCPOf(t *testing.T, c *testCluster, topic string) string {
	t.Helper()
	var addr string
	testnode.Eventually(t, 15*time.Second, "a leader of "+topic, func() bool {
		var ok bool
		addr, ok = c.leaderTCP(topic, 0)
		return ok
	})
	return addr
}

// The same through a kill -9 of the partition's leader in the middle of a
// poison message's deliveries (its second): the new leader delivers it
// again, counting from its log, moves it to <topic>.dead after three
// deliveries of its own, and delivers the message behind it. The message
// dead-lettered before the kill is not delivered again: its confirmation
// was on every ISR member, as an ordered FIN's is.
func TestPoisonMessageDeadLetteredThroughAFailover(t *testing.T) {
	c := startCluster(t, 3)
	c.createPoisoned("poisonkill")
	st := c.state("poisonkill", 0)
	leader := c.nodes[st.Leader]
	p := producer(t, leader.TCP)
	for _, body := range []string{"bad1", "good1", "bad2", "good2"} {
		if err := p.Publish("poisonkill", []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	holding, killed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l := consumePoison(t, c.lookups(), "poisonkill", "ch", func(body string, attempts uint16) {
		if body == "bad2" && attempts == 2 {
			once.Do(func() { close(holding); <-killed })
		}
	})
	select {
	case <-holding:
	case <-time.After(15 * time.Second):
		t.Fatalf("bad2 not delivered a second time; attempts %v %v, good %v", l.saw("bad1"), l.saw("bad2"), l.goods())
	}
	leader.Kill(t)
	close(killed)
	testnode.Eventually(t, 20*time.Second, "a new leader", func() bool {
		next := c.state("poisonkill", 0).Leader
		return next != st.Leader && next != ""
	})
	testnode.Eventually(t, 20*time.Second, "the message behind bad2", func() bool {
		return len(l.goods()) == 2
	})
	if got := l.goods(); !slices.Equal(got, []string{"good1", "good2"}) {
		t.Fatalf("delivered %v", got)
	}
	if got := l.saw("bad1"); !slices.Equal(got, []uint16{1, 2, 3}) {
		t.Fatalf("bad1's deliveries had attempts %v", got)
	}
	// Two on the old leader, then three counted afresh on the new one.
	if got := l.saw("bad2"); !slices.Equal(got, []uint16{1, 2, 1, 2, 3}) {
		t.Fatalf("bad2's deliveries had attempts %v, want 1 2 then 1 2 3", got)
	}
	first, second := c.deadLetterAt("poisonkill.dead", 0), c.deadLetterAt("poisonkill.dead", 1)
	if first.Body != "bad1" || second.Body != "bad2" {
		t.Fatalf("dead letters %q %q", first.Body, second.Body)
	}
	checkOrigin(t, first, "poisonkill", "ch", 3)
	checkOrigin(t, second, "poisonkill", "ch", 3)
}
