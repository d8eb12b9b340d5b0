package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
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
	// ends this member too. A member that does not stop in time is ended
	// here rather than waited for by the parent's cleanup.
	io.Copy(io.Discard, os.Stdin)
	time.AfterFunc(childStopTimeout, func() { os.Exit(3) })
	e.Close()
	os.Exit(0)
}

// childStopTimeout bounds a child member's stop; its parent waits a little
// longer before it kills the child.
const childStopTimeout = 15 * time.Second

// childReadyTimeout bounds the wait for a child member to serve.
const childReadyTimeout = time.Minute

// StartEtcdProcess runs an etcd member as StartEtcd does, but in a process
// of its own (this test binary again, see ServeEtcdIfAsked): a test whose
// own goroutines are many, as thousands of consumers' are, would otherwise
// delay the member's lease renewals with its own work, which no deployment
// does. It returns the host:port for --etcd-endpoints and a client; the
// member stops when the test ends, after the nodes started later. The
// package's TestMain must call ServeEtcdIfAsked before anything else, or
// the child runs the package's tests instead of a member.
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
		// The child's output goes to buffers exec drains, so a member that
		// writes more than a pipe holds never blocks on it.
		stdout := &lineOutput{lined: make(chan struct{})}
		var stderr Output
		cmd.Stdout, cmd.Stderr = stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		line, err := stdout.firstLine(exited)
		if line != "ready" || err != nil {
			cmd.Process.Kill()
			if err == nil {
				err = <-exited
			}
			if line == "address in use" && attempt < 5 {
				continue
			}
			t.Fatalf("etcd process did not start: %q, %v\n%s", line, err, stderr.String())
		}
		t.Cleanup(func() {
			stdin.Close()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("etcd process: %v\n%s", err, stderr.String())
				}
			case <-time.After(childStopTimeout + 5*time.Second):
				cmd.Process.Kill()
				<-exited
				t.Errorf("etcd process did not stop on its stdin's end\n%s", stderr.String())
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

// lineOutput is an Output that reports its first line's end on lined.
type lineOutput struct {
	Output
	once  sync.Once
	lined chan struct{}
}

func (o *lineOutput) Write(b []byte) (int, error) {
	n, err := o.Output.Write(b)
	if bytes.IndexByte(b, '\n') >= 0 {
		o.once.Do(func() { close(o.lined) })
	}
	return n, err
}

// firstLine is the first line the child wrote to out, once written, or
// what it wrote by its exit (then with its exit's error) or by
// childReadyTimeout.
func (o *lineOutput) firstLine(exited <-chan error) (string, error) {
	var err error
	select {
	case <-o.lined:
	case err = <-exited:
		if err == nil {
			err = errors.New("exited")
		}
	case <-time.After(childReadyTimeout):
		err = fmt.Errorf("not ready after %v", childReadyTimeout)
	}
	first, _, _ := strings.Cut(o.String(), "\n")
	return strings.TrimSpace(first), err
}
