package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
	"github.com/partitamq/partita/protocol"
)

// Every partition two nodes share travels on one session between them: the
// connections to a node's cluster port do not grow with the partitions.
func TestOneReplicationSessionPerNodePair(t *testing.T) {
	c := startCluster(t, 3)
	const partitions = 24
	code, body := testnode.Post(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=wide&partition_num=%d&replicator=3", partitions), "")
	if code != 200 {
		t.Fatalf("creating the topic: %d %s", code, body)
	}
	// One acknowledged PUB per partition: each leader has a stream to each
	// follower for every partition.
	// A PUB n2 refuses while it has not yet learned the new partitions'
	// leaders (E_FAILED_ON_NOT_LEADER, not fatal) is sent again.
	pub := dialRaw(t, c.nodes["n2"].TCP)
	for p := range partitions {
		msg := []byte(fmt.Sprintf("m%d", p))
		line := fmt.Appendf(nil, "PUB wide %d\n", p)
		line = binary.BigEndian.AppendUint32(line, uint32(len(msg)))
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := pub.conn.Write(append(line, msg...)); err != nil {
				t.Fatal(err)
			}
			typ, data := pub.frame(10 * time.Second)
			if typ == protocol.FrameTypeResponse && string(data) == "OK" {
				break
			}
			if !bytes.HasPrefix(data, []byte("E_FAILED_ON_NOT_LEADER")) || time.Now().After(deadline) {
				t.Fatalf("PUB to partition %d: %d %q", p, typ, data)
			}
		}
	}
	ports := map[string]string{}
	for id, n := range c.nodes {
		ports[id] = clusterPort(t, n)
	}
	for id, n := range c.nodes {
		out := sessionsFrom(t, n, ports)
		t.Logf("%s has %d sessions out: %v", id, len(out), out)
		for peer, count := range out {
			if count != 1 {
				t.Errorf("%s has %d connections to %s's cluster port, want 1 for %d partitions", id, count, peer, partitions)
			}
		}
		if len(out) != 2 {
			t.Errorf("%s leads partitions followed by both other nodes, has sessions to %v", id, out)
		}
	}
}

func clusterPort(t *testing.T, n *testnode.Process) string {
	t.Helper()
	args := n.Cmd.Args
	for i := 0; i < len(args)-1; i++ {
		if args[i] == "--cluster-address" {
			_, port, err := net.SplitHostPort(args[i+1])
			if err != nil {
				t.Fatal(err)
			}
			return port
		}
	}
	t.Fatal("node started without --cluster-address")
	return ""
}

// sessionsFrom counts the node's established connections to each node's
// cluster port, from the sockets the process holds and the kernel's TCP
// table.
func sessionsFrom(t *testing.T, n *testnode.Process, ports map[string]string) map[string]int {
	t.Helper()
	pid := n.Cmd.Process.Pid
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	byPort := map[int64]string{}
	for id, p := range ports {
		v, _ := strconv.ParseInt(p, 10, 32)
		byPort[v] = id
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// sl local_address rem_address st tx_queue:rx_queue tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "01" || !inodes[fields[9]] {
			continue
		}
		_, remPort, ok := strings.Cut(fields[2], ":")
		if !ok {
			continue
		}
		port, err := strconv.ParseInt(remPort, 16, 32)
		if err != nil {
			continue
		}
		if peer, ok := byPort[port]; ok {
			out[peer]++
		}
	}
	return out
}
