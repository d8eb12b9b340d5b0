package testnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdChildEnv carries an EtcdConfig, as JSON, to a test binary started as
// an etcd member by StartEtcdProcess.
const etcdChildEnv = "PARTITA_TESTNODE_ETCD"

// ServeEtcdIfAsked makes this test binary an etcd member and never returns
// when StartEtcdProcess started it; otherwise it returns at once. A package
// using StartEtcdProcess calls it first in its TestMain.
func ServeEtcdIfAsked() {
	spec := os.Getenv(etcdChildEnv)
	if spec == "" {
		return
	}
	var cfg cluster.EtcdConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "etcd child:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e, err := cluster.StartEmbedded(ctx, cfg)
	cancel()
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Println("address in use")
		}
		fmt.Fprintln(os.Stderr, "etcd child:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	// The parent holds stdin open: its end, by a Kill or its own exit,
	// ends this member too.
	io.Copy(io.Discard, os.Stdin)
	e.Close()
	os.Exit(0)
}

// StartEtcdProcess runs an etcd member as StartEtcd does, but in a process
// of its own (this test binary again, see ServeEtcdIfAsked): a test whose
// own goroutines are many, as thousands of consumers' are, would otherwise
// delay the member's lease renewals with its own work, which no deployment
// does. It returns the host:port for --etcd-endpoints and a client; the
// member stops when the test ends, after the nodes started later.
func StartEtcdProcess(t testing.TB) (string, *clientv3.Client) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	addr := func() string { return fmt.Sprintf("127.0.0.1:%d", FreePort(t)) }
	// A free port can be taken between the pick and etcd's listen: a few
	// fresh picks settle it.
	for attempt := 1; ; attempt++ {
		cfg := cluster.EtcdConfig{Name: "test", DataDir: t.TempDir(), ClientAddr: addr(), PeerAddr: addr(), TickMs: 10, ElectionMs: 50}
		spec, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), etcdChildEnv+"="+string(spec))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr Output
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if strings.TrimSpace(line) != "ready" {
			stdin.Close()
			cmd.Wait()
			if strings.TrimSpace(line) == "address in use" && attempt < 5 {
				continue
			}
			t.Fatalf("etcd process did not start: %q\n%s", line, stderr.String())
		}
		t.Cleanup(func() {
			stdin.Close()
			if err := cmd.Wait(); err != nil {
				t.Logf("etcd process: %v\n%s", err, stderr.String())
			}
		})
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{cfg.ClientAddr}, DialTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cli.Close() })
		return cfg.ClientAddr, cli
	}
}
