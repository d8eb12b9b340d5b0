package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/internal/testcert"
	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/node"
)

// A cluster whose etcd and node-to-node port require the cluster
// certificate replicates over mutual TLS; a node without that certificate,
// or with one another CA signed, cannot join: it never reaches the
// metadata, so it is never registered nor given a partition.
func TestClusterMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t, "cluster")
	etcdCert, nodeCert := ca.Issue(t, "etcd"), ca.Issue(t, "node")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clientAddr := fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t))
	e, err := cluster.StartEmbedded(ctx, cluster.EtcdConfig{
		Name: "test", DataDir: t.TempDir(), ClientAddr: clientAddr, PeerAddr: fmt.Sprintf("127.0.0.1:%d", testnode.FreePort(t)),
		TickMs: 10, ElectionMs: 50, TLS: &cluster.EtcdTLS{CertFile: etcdCert.CertFile, KeyFile: etcdCert.KeyFile, CAFile: ca.CertFile},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	endpoint := "https://" + clientAddr
	c := startNodes(t, endpoint, e.Client(), 2,
		"--cluster-tls-cert", nodeCert.CertFile, "--cluster-tls-key", nodeCert.KeyFile, "--cluster-tls-ca", ca.CertFile)
	c.etcd = e

	st := c.createTopic("secure", 2)
	if len(st.ISR) != 2 {
		t.Fatalf("ISR %v, want both nodes", st.ISR)
	}
	if code, body := testnode.Post(t, c.nodes[st.Leader].HTTP, "/pub?topic=secure", "replicated over mTLS"); code != 200 {
		t.Fatalf("publish: %d %s", code, body)
	}
	follower := c.followers(st)[0]
	if fi, err := os.Stat(c.commitLog(follower, "secure")); err != nil || fi.Size() == 0 {
		t.Fatalf("follower %s has no commit record of the acknowledged publish: %v", follower, err)
	}

	stranger := testcert.NewCA(t, "stranger").Issue(t, "intruder")
	for name, extra := range map[string][]string{
		"no certificate":      nil,
		"foreign certificate": {"--cluster-tls-cert", stranger.CertFile, "--cluster-tls-key", stranger.KeyFile, "--cluster-tls-ca", ca.CertFile},
	} {
		t.Run(name, func(t *testing.T) {
			args := testnode.Args(t, t.TempDir(), append([]string{"--etcd-endpoints", endpoint, "--node-id", "intruder"}, extra...)...)
			cfg, _, err := node.LoadConfig(args, func(string) string { return "" })
			if err != nil {
				t.Fatal(err)
			}
			// The start is bounded: a node that cannot reach etcd keeps
			// retrying until its context ends.
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			n, err := node.Start(sctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				n.Close()
				t.Fatal("node without the cluster certificate started")
			}
			nodes, err := cluster.Nodes(context.Background(), e.Client(), "/partita/")
			if err != nil {
				t.Fatal(err)
			}
			for _, ni := range nodes {
				if ni.ID == "intruder" {
					t.Fatalf("intruder registered: %+v", nodes)
				}
			}
		})
	}
}
