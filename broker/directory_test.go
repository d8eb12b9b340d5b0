package broker

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdBroker is node n2's broker over a fresh embedded etcd that holds a
// topic of the given partitions, all led by n1, and n1's registration.
// The broker's watches do not run: its view is what the test stores.
func etcdBroker(tb testing.TB, name string, partitions int32) *Broker {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli := embeddedEtcd(tb)
	meta, assignments := cluster.NewMetaStore(cli, ""), cluster.NewAssignments(cli, "")
	if _, _, err := meta.CreateTopic(ctx, name, partitions, 1); err != nil {
		tb.Fatal(err)
	}
	for p := range partitions {
		st := cluster.PartitionState{Topic: name, Partition: p, Leader: "n1", ISR: []string{"n1"}, EpochForWrite: 1, Replicas: 1}
		if _, _, err := assignments.Create(ctx, st); err != nil {
			tb.Fatal(err)
		}
	}
	reg, err := cluster.Register(ctx, cli, "", cluster.NodeInfo{ID: "n1", TCPAddress: "127.0.0.1:4150", HTTPAddress: "127.0.0.1:4151"}, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { reg.Close() })
	return New(Config{NodeID: "n2", Assignments: assignments, Etcd: cli}, nil, meta)
}

// embeddedEtcd is a client of a fresh etcd member run in this process for
// the test.
func embeddedEtcd(tb testing.TB) *clientv3.Client {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	e, err := cluster.StartEmbedded(ctx, cluster.EtcdConfig{Name: "test", DataDir: tb.TempDir(), ClientAddr: addr(), PeerAddr: addr(), TickMs: 10, ElectionMs: 50})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e.Client()
}

// leaderIDs lists each partition's leader in a lookup's answer.
func leaderIDs(l Leaders) []string {
	ids := make([]string, l.Partitions)
	for p, n := range l.ByPartition {
		ids[p] = n.ID
	}
	return ids
}

// Lookup answers from the cluster view for a topic the view knows whole,
// and reads etcd for one it does not: a topic created a moment ago
// through another node is found before the watches deliver it here.
func TestLookupReadsEtcdOnlyForATopicTheViewLacks(t *testing.T) {
	b := etcdBroker(t, "fresh", 2)
	lookup := func(what string) []string {
		t.Helper()
		out, found, err := b.Lookup(t.Context(), "fresh", false)
		if err != nil || !found {
			t.Fatalf("%s: found %v, %v", what, found, err)
		}
		return leaderIDs(out)
	}
	if got := fmt.Sprint(lookup("with an empty view")); got != "[n1 n1]" {
		t.Fatalf("with an empty view the leaders are %s, want etcd's [n1 n1]", got)
	}
	// The view says n3 leads, etcd n1: the answer tells which was read.
	view := withTopicLedBy(&emptyView, "n3", "fresh", 2, 1)
	b.view.Store(view)
	if got := fmt.Sprint(lookup("with the topic in the view")); got != "[n3 n3]" {
		t.Fatalf("with the topic in the view the leaders are %s, want the view's [n3 n3]", got)
	}
	partial, _ := view.withPartition(cluster.PartitionState{Topic: "fresh", Partition: 1})
	b.view.Store(partial)
	if got := fmt.Sprint(lookup("with a partition missing from the view")); got != "[n1 n1]" {
		t.Fatalf("with a partition missing from the view the leaders are %s, want etcd's [n1 n1]", got)
	}
	if _, found, err := b.Lookup(t.Context(), "absent", false); err != nil || found {
		t.Fatalf("a topic neither the view nor etcd has: found %v, %v", found, err)
	}
}

// BenchmarkLookup is /lookup's broker work for one topic of 8 partitions
// on a node whose view holds 10,000 partitions (1,250 topics of 8): "view"
// answers from the cluster view; "etcd" makes the four reads Lookup made
// before it had the view, and still makes for a topic the view lacks, from
// an embedded etcd on the same machine. etcd holds only the topic looked
// up: its reads are of that topic's keys and the node registrations, so
// the partitions of other topics would change little.
func BenchmarkLookup(b *testing.B) {
	const topics, partitions = 1250, 8
	br := etcdBroker(b, "topic0", partitions)
	view := &emptyView
	for i := range topics {
		view = withTopicLedBy(view, "n1", fmt.Sprint("topic", i), partitions, 1)
	}
	ctx := context.Background()
	b.Run("source=view", func(b *testing.B) {
		br.view.Store(view)
		for b.Loop() {
			if out, found, err := br.Lookup(ctx, "topic0", false); err != nil || !found || len(out.ByPartition) != partitions {
				b.Fatalf("lookup: %+v, %v, %v", out, found, err)
			}
		}
	})
	b.Run("source=etcd", func(b *testing.B) {
		for b.Loop() {
			if out, found, err := br.lookupInEtcd(ctx, "topic0", false); err != nil || !found || len(out.ByPartition) != partitions {
				b.Fatalf("lookup: %+v, %v, %v", out, found, err)
			}
		}
	})
}
