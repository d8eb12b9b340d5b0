package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// etcd unavailable for a few seconds: the partition's leader keeps taking
// writes on its current ISR (the write path never waits on etcd), a
// metadata change made meanwhile fails clearly, and metadata changes work
// again once etcd is back, cluster-wide, with nothing acknowledged lost.
func TestEtcdOutageLeadersKeepServingWrites(t *testing.T) {
	etcd := startSystemEtcd(t)
	c := startNodes(t, etcd.Endpoint, etcd.Client, 3)
	st := c.createTopic("outage", 3)
	leader := c.nodes[st.Leader]
	t.Cleanup(func() {
		if t.Failed() {
			etcd.Process.Signal(syscall.SIGCONT)
			t.Logf("state: %+v", c.state("outage", 0))
			for id, n := range c.nodes {
				resp, err := http.Get("http://" + n.HTTP + "/stats?format=json&topic=outage")
				if err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("%s stats: %s", id, b)
				}
			}
		}
	})
	if code, body := testnode.Post(t, leader.HTTP, "/channel/create?topic=outage&channel=before", ""); code != 200 {
		t.Fatalf("channel create: %d %s", code, body)
	}
	p := producer(t, leader.TCP)
	acked := map[string]bool{}
	publish := func(body string) {
		t.Helper()
		if err := p.Publish("outage", []byte(body)); err != nil {
			t.Fatalf("publish %s: %v", body, err)
		}
		acked[body] = true
	}
	publish("before")

	if err := etcd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The signal takes effect asynchronously: a request already being
	// answered may still get through.
	testnode.Eventually(t, 5*time.Second, "etcd to stop answering after SIGSTOP", func() bool {
		probe, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := etcd.Client.Get(probe, "probe")
		return err != nil
	})
	created := make(chan int, 1)
	go func() {
		code, _ := testnode.Post(t, leader.HTTP, "/channel/create?topic=outage&channel=during", "")
		created <- code
	}()
	stopped := time.Now()
	for i := 0; time.Since(stopped) < 4*time.Second; i++ {
		publish(fmt.Sprint("during-", i))
	}
	select {
	case code := <-created:
		if code == 200 {
			t.Fatal("channel created while etcd was unavailable")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a channel create hung while etcd was unavailable")
	}
	etcd.Process.Signal(syscall.SIGCONT)

	publish("after")
	testnode.Eventually(t, 20*time.Second, "a channel create once etcd is back", func() bool {
		code, _ := testnode.Post(t, leader.HTTP, "/channel/create?topic=outage&channel=after", "")
		return code == 200
	})
	for _, f := range c.followers(st) {
		testnode.Eventually(t, 10*time.Second, "the new channel on "+f, func() bool {
			return channelDepth(t, c.nodes[f].HTTP, "outage", "after") >= 0
		})
	}
	if now := c.state("outage", 0); now.Leader != st.Leader || len(now.ISR) != 3 {
		t.Fatalf("after the outage: %+v, want %s leading an ISR of 3", now, st.Leader)
	}
	// Every node registers again, so lookups find the leader.
	lookupAt := c.nodes[c.followers(st)[0]].HTTP
	deadline := time.Now().Add(20 * time.Second)
	for {
		var doc lookupDoc
		getJSONInto(t, lookupAt, "/lookup?topic=outage", &doc)
		if doc.Partitions["0"].RemoteAddress == leader.TCP {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lookup after the outage: %+v, want the leader %s; leader's log:\n%s", doc, leader.TCP, leader.Log)
		}
		<-time.After(20 * time.Millisecond)
	}
	deliversAll(t, []string{lookupAt}, "outage", "before", acked)
}
