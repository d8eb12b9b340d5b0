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
	cfg := poisonConfig()
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

// poisonConfig is go-nsq's configuration for a consumer that fails
// messages: one in flight, go-nsq's own attempt limit and backoff off, so
// the node's max_attempts alone decides, and REQs without delay.
func poisonConfig() *nsq.Config {
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 1
	cfg.MaxAttempts = 0
	cfg.MaxBackoffDuration = 0
	cfg.DefaultRequeueDelay = 0
	return cfg
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
	// The leader learns the channel's settings from etcd's watch: the
	// test's consumer must not reach the channel before they arrive, or its
	// first deliveries count no attempts (a busy CI machine took seconds).
	leader := c.nodes[c.state(topic, 0).Leader].HTTP
	testnode.Eventually(c.t, 15*time.Second, "the leader's channel with max_attempts 3", func() bool {
		var st struct {
			Topics []struct {
				Channels []struct {
					Name        string `json:"channel_name"`
					MaxAttempts uint16 `json:"max_attempts"`
				} `json:"channels"`
			} `json:"topics"`
		}
		getJSONInto(c.t, leader, "/stats?format=json&topic="+topic, &st)
		for _, tp := range st.Topics {
			for _, ch := range tp.Channels {
				if ch.Name == "ch" && ch.MaxAttempts == 3 {
					return true
				}
			}
		}
		return false
	})
}

// A handler that always fails one message of an ordered channel with
// max_attempts 3: the message is delivered three times, then published to
// <topic>.dead (made on first use) with a header naming its origin, and
// the messages behind it are delivered; a plain go-nsq consumer of the
// dead-letter topic gets it; /stats counts it, /message/get says where it
// went; /channel/redrive through any node gives it back to the channel.
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

	// Redriven through a node leading neither partition where there is one,
	// the message is delivered again three times and dead again.
	deadLeader := c.state("poison.dead", 0).Leader
	via, viaID := leader, ""
	for id, n := range c.nodes {
		if id != deadLeader && n != leader {
			via, viaID = n, id
		}
	}
	code, body := testnode.Get(t, via.HTTP, "/message/get?topic=poison.dead&partition=0&search_mode=count&search_pos=0")
	var m struct {
		ID string `json:"id"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("/message/get of the dead letter: %d %s", code, body)
	}
	t.Logf("poison/0 led by %s, poison.dead/0 by %s, redrive through %s", c.state("poison", 0).Leader, deadLeader, viaID)
	q := "/channel/redrive?topic=poison&channel=ch&partition=0&msgid=" + m.ID
	if code, body := testnode.Post(t, via.HTTP, q, ""); code != 200 {
		t.Fatalf("redrive: %d %s", code, body)
	}
	testnode.Eventually(t, 15*time.Second, "the redriven message's deliveries", func() bool {
		return len(l.saw("bad")) == 6
	})
	if again := c.deadLetterAt("poison.dead", 1); again.Body != "bad" {
		t.Fatalf("dead again: %q", again.Body)
	}
	if got := l.saw("bad"); !slices.Equal(got, []uint16{1, 2, 3, 1, 2, 3}) {
		t.Fatalf("the redriven message's deliveries had attempts %v", got)
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

// poisonStream is the fault suite's dead-letter workload: topic pois (one
// partition, three replicas) whose channel dl is ordered with max_attempts
// 3. One producer publishes pois-N, every tenth of them pois-N-bad, moving
// to the next node on a failure; a go-nsq consumer through every node's
// lookup fails every bad one, which go-nsq REQs, and finishes the rest.
// The nemesis's kills, partitions and pauses hit the leader, the consumer
// and the dead-letter topic's creation and publishes alike.
type poisonStream struct {
	f *faultLab

	mu        sync.Mutex
	attempted map[string]bool
	acked     []string       // acknowledged bodies, in publish order
	delivered map[string]int // good bodies finished, and how often
	failed    map[string]int // bad bodies failed, and how often
}

const poisonTopic, poisonChannel = "pois", "dl"

func startPoisonStream(f *faultLab) *poisonStream {
	t := f.t
	if code, body := testnode.Post(t, f.nodes["n2"].HTTP, "/topic/create?topic="+poisonTopic+"&partition_num=1&replicator=3", ""); code != 200 {
		t.Fatalf("create %s: %d %s", poisonTopic, code, body)
	}
	for _, q := range []string{
		"/channel/create?topic=" + poisonTopic + "&channel=" + poisonChannel + "&max_attempts=3",
		"/channel/setorder?topic=" + poisonTopic + "&channel=" + poisonChannel + "&order=true",
	} {
		if code, body := testnode.Post(t, f.nodes["n2"].HTTP, q, ""); code != 200 {
			t.Fatalf("%s: %d %s", q, code, body)
		}
	}
	return &poisonStream{f: f, attempted: map[string]bool{}, delivered: map[string]int{}, failed: map[string]int{}}
}

// publish publishes until stop, twenty a second.
func (s *poisonStream) publish(stop <-chan struct{}) {
	at := 0
	p := &freshProducer{addr: s.f.tcp(s.f.ids[at])}
	defer p.close()
	for seq := 0; !stopping(stop); {
		body := fmt.Sprintf("%s-%d", poisonTopic, seq)
		if seq%10 == 9 {
			body += "-bad"
		}
		s.mu.Lock()
		s.attempted[body] = true
		s.mu.Unlock()
		if err := p.publish(poisonTopic, body); err != nil {
			at = (at + 1) % len(s.f.ids)
			p.addr = s.f.tcp(s.f.ids[at])
			if !wait(stop, 50*time.Millisecond) {
				return
			}
			continue
		}
		s.mu.Lock()
		s.acked = append(s.acked, body)
		s.mu.Unlock()
		seq++
		if !wait(stop, 50*time.Millisecond) {
			return
		}
	}
}

// consume runs the failing consumer until stop.
func (s *poisonStream) consume(t *testing.T, stop <-chan struct{}) {
	c := s.consumer(poisonTopic, poisonChannel, func(body string) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if strings.HasSuffix(body, "-bad") {
			s.failed[body]++
			return fmt.Errorf("%s fails", body)
		}
		s.delivered[body]++
		return nil
	})
	if c == nil {
		t.Errorf("the poison consumer did not start")
		return
	}
	<-stop
	c.Stop()
	<-c.StopChan
}

// consumer is a go-nsq consumer of topic/channel through every node's
// lookup, as poisonConfig makes it.
func (s *poisonStream) consumer(topic, channel string, handle func(body string) error) *nsq.Consumer {
	cfg := poisonConfig()
	cfg.LookupdPollInterval = time.Second
	cfg.LookupdPollJitter = 0.1
	c, err := nsq.NewConsumer(topic, channel, cfg)
	if err != nil {
		return nil
	}
	c.SetLogger(quietLogger, nsq.LogLevelError)
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error { return handle(string(m.Body)) }))
	var lookups []string
	for _, id := range s.f.ids {
		lookups = append(lookups, s.f.lab.addr(id)+":4151")
	}
	if c.ConnectToNSQLookupds(lookups) != nil {
		return nil
	}
	return c
}

// undelivered counts the acknowledged good messages not delivered yet.
func (s *poisonStream) undelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, b := range s.acked {
		if !strings.HasSuffix(b, "-bad") && s.delivered[b] == 0 {
			n++
		}
	}
	return n
}

// poisonVerdict is what the poison stream's check found.
type poisonVerdict struct {
	Acknowledged, Bad int
	// Undelivered: acknowledged good messages never delivered (the
	// partition did not go on past a poison message).
	Undelivered []string
	// NotDead: acknowledged bad messages that never reached the
	// dead-letter topic.
	NotDead []string
	// DeadTwice: bad messages in the dead-letter topic more than once (a
	// failover between the publish and its confirmation); allowed.
	DeadTwice int
	// MaxDeliveries of one bad message, three per leader it met.
	MaxDeliveries int
	// Phantom: dead letters no producer published as bad.
	Phantom []string
}

func (v poisonVerdict) String() string {
	return fmt.Sprintf("poison stream: %d acknowledged, %d bad; %d good undelivered, %d bad not in %s.dead, %d dead twice, at most %d deliveries of a bad one, %d phantom dead letters",
		v.Acknowledged, v.Bad, len(v.Undelivered), len(v.NotDead), poisonTopic, v.DeadTwice, v.MaxDeliveries, len(v.Phantom))
}

func (v poisonVerdict) problems() []string {
	var out []string
	if len(v.Undelivered) > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged messages of %s never delivered past its poison ones, e.g. %v", len(v.Undelivered), poisonTopic, v.Undelivered[:min(5, len(v.Undelivered))]))
	}
	if len(v.NotDead) > 0 {
		out = append(out, fmt.Sprintf("%d acknowledged poison messages never reached %s.dead, e.g. %v", len(v.NotDead), poisonTopic, v.NotDead[:min(5, len(v.NotDead))]))
	}
	if len(v.Phantom) > 0 {
		out = append(out, fmt.Sprintf("%s.dead holds messages never published as poison: %v", poisonTopic, v.Phantom[:min(5, len(v.Phantom))]))
	}
	return out
}

// check reads the dead-letter topic from its first channel until every
// acknowledged bad message is there or nothing new came for 20 s, and
// judges the stream.
func (s *poisonStream) check() poisonVerdict {
	s.mu.Lock()
	acked := slices.Clone(s.acked)
	v := poisonVerdict{Acknowledged: len(acked)}
	for _, b := range acked {
		if strings.HasSuffix(b, "-bad") {
			v.Bad++
		} else if s.delivered[b] == 0 {
			v.Undelivered = append(v.Undelivered, b)
		}
	}
	for _, n := range s.failed {
		v.MaxDeliveries = max(v.MaxDeliveries, n)
	}
	s.mu.Unlock()

	var mu sync.Mutex
	dead := map[string]int{}
	missing := func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, b := range acked {
			if strings.HasSuffix(b, "-bad") && dead[b] == 0 {
				out = append(out, b)
			}
		}
		return out
	}
	if v.Bad > 0 {
		c := s.consumer(poisonTopic+".dead", "check", func(body string) error {
			mu.Lock()
			dead[body]++
			mu.Unlock()
			return nil
		})
		if c != nil {
			last, progress := len(missing()), time.Now()
			for last > 0 && time.Since(progress) < 20*time.Second {
				<-time.After(200 * time.Millisecond)
				if m := len(missing()); m < last {
					last, progress = m, time.Now()
				}
			}
			c.Stop()
			<-c.StopChan
		}
	}
	v.NotDead = missing()
	s.mu.Lock()
	defer s.mu.Unlock()
	for b, n := range dead {
		if n > 1 {
			v.DeadTwice++
		}
		// A publish that failed may have been written: attempted is
		// what any producer sent.
		if !s.attempted[b] || !strings.HasSuffix(b, "-bad") {
			v.Phantom = append(v.Phantom, b)
		}
	}
	return v
}
