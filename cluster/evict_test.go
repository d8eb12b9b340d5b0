package cluster

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// A registration whose node the probe finds alive stays; one it finds gone
// is revoked, and the node hears it lost its lease.
func TestEvictIfGoneRevokesOnlyAGoneNode(t *testing.T) {
	_, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	r := mustRegister(t, cli, testNode("a"))
	var asked NodeInfo
	evicted, err := EvictIfGone(ctx, cli, "", "a", func(info NodeInfo) bool { asked = info; return false })
	if err != nil || evicted || asked != testNode("a") {
		t.Fatalf("a node found alive: evicted %v, %v, probe asked of %+v", evicted, err, asked)
	}
	if got := liveNodes(t, cli, ""); len(got) != 1 {
		t.Fatalf("registered after a probe found it alive: %v", got)
	}
	evicted, err = EvictIfGone(ctx, cli, "", "a", func(NodeInfo) bool { return true })
	if err != nil || !evicted {
		t.Fatalf("a node found gone: evicted %v, %v", evicted, err)
	}
	if got := liveNodes(t, cli, ""); len(got) != 0 {
		t.Fatalf("registered after eviction: %v", got)
	}
	select {
	case <-r.Lost():
	case <-time.After(waitTimeout):
		t.Fatal("the evicted node's registration does not report its lease lost")
	}
}

// A node that registered again between the read and the probe keeps its
// new registration: only the lease read is revoked.
func TestEvictIfGoneSparesARegistrationMadeSince(t *testing.T) {
	_, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	old := mustRegister(t, cli, testNode("a"))
	evicted, err := EvictIfGone(ctx, cli, "", "a", func(NodeInfo) bool {
		if err := old.Close(); err != nil {
			t.Fatal(err)
		}
		mustRegister(t, cli, testNode("a"))
		return true
	})
	if err != nil || !evicted {
		t.Fatalf("evicted %v, %v", evicted, err)
	}
	if got := liveNodes(t, cli, ""); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("the registration made since was evicted: %v", got)
	}
}

// With no registration there is nothing to probe or revoke.
func TestEvictIfGoneWithoutARegistration(t *testing.T) {
	_, cli, _ := newTestAssignments(t)
	evicted, err := EvictIfGone(context.Background(), cli, "", "nobody", func(NodeInfo) bool {
		t.Error("probed a node that is not registered")
		return true
	})
	if err != nil || evicted {
		t.Fatalf("evicted %v, %v", evicted, err)
	}
}

// The gone node's campaign for the controller's office ends with it, so
// the next candidate holds the office at once; other candidates stay.
func TestEvictIfGoneEndsTheGoneNodesCampaign(t *testing.T) {
	_, cli, _ := newTestAssignments(t)
	ctx := context.Background()
	mustRegister(t, cli, testNode("a"))
	campaign := func(id string) *concurrency.Election {
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(60))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sess.Close() })
		e := concurrency.NewElection(sess, electionPrefix(""))
		go e.Campaign(ctx, id)
		return e
	}
	a := campaign("a")
	waitFor(t, func() bool {
		l, err := a.Leader(ctx)
		return err == nil && string(l.Kvs[0].Value) == "a"
	})
	b := campaign("b")
	waitFor(t, func() bool {
		resp, err := cli.Get(ctx, electionPrefix("")+"/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 2
	})
	if evicted, err := EvictIfGone(ctx, cli, "", "a", func(NodeInfo) bool { return true }); err != nil || !evicted {
		t.Fatalf("evicted %v, %v", evicted, err)
	}
	waitFor(t, func() bool {
		l, err := b.Leader(ctx)
		return err == nil && string(l.Kvs[0].Value) == "b"
	})
}
