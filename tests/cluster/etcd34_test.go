package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// debianEtcd is the etcd server of Debian's etcd-server package (3.4), which
// scripts/test.sh installs: the node's v3.6 client must work against it.
const debianEtcd = "/usr/bin/etcd"

// startSystemEtcd runs the system's etcd on loopback with its own data
// directory, and stops it when the test ends.
func startSystemEtcd(t *testing.T) *systemEtcd {
	t.Helper()
	return startSystemEtcdOn(t, "127.0.0.1", 0)
}

// systemEtcd is a running etcd process of the system's package.
type systemEtcd struct {
	Endpoint string
	Client   *clientv3.Client
	Process  *os.Process
}

// startSystemEtcdOn runs the system's etcd on host, its client port at port
// (a free one when 0).
func startSystemEtcdOn(t *testing.T, host string, port int) *systemEtcd {
	t.Helper()
	if _, err := os.Stat(debianEtcd); err != nil {
		t.Fatalf("%s missing: install Debian's etcd-server (scripts/test.sh does): %v", debianEtcd, err)
	}
	for attempt := 1; ; attempt++ {
		clientPort := port
		if clientPort == 0 {
			clientPort = testnode.FreePort(t)
		}
		client := fmt.Sprintf("http://%s:%d", host, clientPort)
		peer := fmt.Sprintf("http://%s:%d", host, testnode.FreePort(t))
		var log strings.Builder
		cmd := exec.Command(debianEtcd, "--name", "partita-test", "--data-dir", t.TempDir(),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", "partita-test="+peer)
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		stop := func() { cmd.Process.Kill(); <-done }
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second})
		if err != nil {
			stop()
			t.Fatal(err)
		}
		testnode.Eventually(t, 15*time.Second, "etcd to answer", func() bool {
			select {
			case <-done:
				return true // exited: a port was taken
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := cli.Get(ctx, "health")
			return err == nil
		})
		select {
		case <-done:
			cli.Close()
			if attempt < 5 && strings.Contains(log.String(), "address already in use") {
				continue
			}
			t.Fatalf("etcd exited: %s", log.String())
		default:
		}
		t.Cleanup(func() { cli.Close(); cmd.Process.Signal(syscall.SIGCONT); stop() })
		return &systemEtcd{Endpoint: client, Client: cli, Process: cmd.Process}
	}
}

// The contract outside checks use: three nodes on one external etcd
// (Debian's 3.4), a topic of two partitions with three replicas created on
// any node, PUB on every node acknowledged once on every in-sync replica,
// and /lookup and /stats on every node describing the partitions.
func TestContractOnDebianEtcd34(t *testing.T) {
	etcd := startSystemEtcd(t)
	c := startNodes(t, etcd.Endpoint, etcd.Client, 3)
	code, body := testnode.Post(t, c.nodes["n2"].HTTP, "/topic/create?topic=contract&partition_num=2&replicator=3", "")
	if code != 200 {
		t.Fatalf("create: %d %s", code, body)
	}
	for p := int32(0); p < 2; p++ {
		st := c.state("contract", p)
		if len(st.ISR) != 3 || st.EpochForWrite < 1 {
			t.Fatalf("partition %d: %+v", p, st)
		}
	}
	published := 0
	for _, id := range []string{"n1", "n2", "n3"} {
		prod := producer(t, c.nodes[id].TCP)
		for i := 0; i < 10; i++ {
			if err := prod.Publish("contract", []byte(fmt.Sprintf("%s-%d", id, i))); err != nil {
				t.Fatalf("publish to %s: %v", id, err)
			}
			published++
		}
	}
	// A node answers /lookup from its watched view of etcd, which may be a
	// moment behind the leaderships etcd holds already.
	for _, id := range []string{"n1", "n2", "n3"} {
		var lookup struct {
			Producers  []json.RawMessage `json:"producers"`
			Partitions map[string]struct {
				BroadcastAddress string `json:"broadcast_address"`
				TCPPort          int    `json:"tcp_port"`
			} `json:"partitions"`
		}
		complete := func() bool {
			lookup.Producers, lookup.Partitions = nil, nil
			getJSONInto(t, c.nodes[id].HTTP, "/lookup?topic=contract", &lookup)
			return len(lookup.Partitions) == 2 && lookup.Partitions["0"].TCPPort != 0 && lookup.Partitions["1"].TCPPort != 0 && len(lookup.Producers) > 0
		}
		testnode.Eventually(t, 10*time.Second, id+"'s /lookup naming both partitions' leaders", complete)
	}
	// Every node holds both partitions; the leaders' counts add up to what
	// was published, and every follower has what its leader has.
	counts := map[int]map[bool][]int64{0: {}, 1: {}}
	for _, id := range []string{"n1", "n2", "n3"} {
		var stats struct {
			Topics []struct {
				TopicName      string `json:"topic_name"`
				TopicPartition string `json:"topic_partition"`
				IsLeader       bool   `json:"is_leader"`
				MessageCount   int64  `json:"message_count"`
			} `json:"topics"`
		}
		getJSONInto(t, c.nodes[id].HTTP, "/stats?format=json&topic=contract", &stats)
		for _, tp := range stats.Topics {
			if tp.TopicName != "contract" {
				continue
			}
			var p int
			fmt.Sscan(tp.TopicPartition, &p)
			counts[p][tp.IsLeader] = append(counts[p][tp.IsLeader], tp.MessageCount)
		}
	}
	total := int64(0)
	for p, byRole := range counts {
		if len(byRole[true]) != 1 || len(byRole[false]) != 2 {
			t.Fatalf("partition %d: leaders %v, followers %v; want one leader and two followers", p, byRole[true], byRole[false])
		}
		total += byRole[true][0]
	}
	if total != int64(published) {
		t.Fatalf("leaders hold %d messages, %d were published", total, published)
	}
}

func getJSONInto(t *testing.T, hostport, path string, v any) {
	t.Helper()
	resp, err := http.Get("http://" + hostport + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
