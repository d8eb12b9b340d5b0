package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

type lookupDoc struct {
	Producers []struct {
		RemoteAddress string `json:"remote_address"`
	} `json:"producers"`
	Partitions map[string]struct {
		RemoteAddress string `json:"remote_address"`
	} `json:"partitions"`
}

// 23. /lookup?access=w leaves out a partition whose leader disabled its
// writes (here: it failed a write with two of three replicas gone), while
// access=r still returns the disabled leader; once the replicas are back
// and the leader takes writes again, access=w lists it again.
func TestBehaviour23LookupForWriteOmitsWriteDisabledPartitions(t *testing.T) {
	c := startCluster(t, 3)
	st := c.createTopic("access", 3)
	leader := c.nodes[st.Leader]
	p := producer(t, leader.TCP)
	if err := p.Publish("access", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	for _, access := range []string{"r", "w"} {
		var doc lookupDoc
		getJSONInto(t, leader.HTTP, "/lookup?topic=access&access="+access, &doc)
		if doc.Partitions["0"].RemoteAddress != leader.TCP {
			t.Fatalf("access=%s before any fault: %+v", access, doc)
		}
	}
	followers := c.followers(st)
	dirs := map[string]string{}
	for _, f := range followers {
		dirs[f] = c.nodes[f].DataPath
		c.nodes[f].Kill(t)
	}
	if err := p.Publish("access", []byte("lost")); err == nil || !strings.Contains(err.Error(), "E_FAILED_ON_NOT_WRITABLE") {
		t.Fatalf("publish with two of three replicas gone: %v", err)
	}
	testnode.Eventually(t, 10*time.Second, "access=w to leave the disabled partition out", func() bool {
		var doc lookupDoc
		getJSONInto(t, leader.HTTP, "/lookup?topic=access&access=w", &doc)
		_, listed := doc.Partitions["0"]
		return !listed && len(doc.Producers) == 0
	})
	var doc lookupDoc
	getJSONInto(t, leader.HTTP, "/lookup?topic=access&access=r", &doc)
	if doc.Partitions["0"].RemoteAddress != leader.TCP {
		t.Fatalf("access=r with writes disabled: %+v, want the leader %s", doc, leader.TCP)
	}

	for _, f := range followers {
		c.nodes[f] = testnode.StartProcess(t, dirs[f], "--etcd-endpoints", c.etcdAddr, "--node-id", f)
	}
	testnode.Eventually(t, 30*time.Second, "access=w to list the partition again", func() bool {
		var doc lookupDoc
		getJSONInto(t, leader.HTTP, "/lookup?topic=access&access=w", &doc)
		return doc.Partitions["0"].RemoteAddress == leader.TCP
	})
	testnode.Eventually(t, 10*time.Second, "a publish to succeed again", func() bool {
		return p.Publish("access", []byte("again")) == nil
	})
}
