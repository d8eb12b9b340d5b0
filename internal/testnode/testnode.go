// Package testnode starts real Partita nodes for tests: in this process
// (Start) or as a separate process of the built binary (StartProcess).
package testnode

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/loopback"
	"github.com/partitamq/partita/node"
)

// Node is a node started for a test.
type Node struct {
	*node.Node
	DataPath string
	Args     []string
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(loopback.FreeAddr(t))
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Args are the flags for a node on fresh loopback ports in dataPath, with
// etcd's timers shortened; extra flags come last and win.
func Args(t testing.TB, dataPath string, extra ...string) []string {
	// All five listeners stay open until every port is picked, so no two
	// flags get the same port.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		return ln.Addr().String()
	}
	args := []string{
		"--data-path", dataPath,
		"--tcp-address", addr(),
		"--http-address", addr(),
		"--cluster-address", addr(),
		"--etcd-client-address", addr(),
		"--etcd-peer-address", addr(),
		"--etcd-tick-ms", "10",
		"--etcd-election-ms", "50",
		"--log-level", "warn",
	}
	return append(args, extra...)
}

// Start runs a node in this process; it stops when the test ends.
func Start(t testing.TB, extra ...string) *Node {
	t.Helper()
	return StartIn(t, t.TempDir(), extra...)
}

// StartIn runs a node in this process over dataPath.
// A port picked by FreePort can be taken by another socket before the node
// binds it; such a start is retried on fresh ports.
func StartIn(t testing.TB, dataPath string, extra ...string) *Node {
	t.Helper()
	etcdDir := filepath.Join(dataPath, "etcd")
	_, statErr := os.Stat(etcdDir)
	freshEtcd := os.IsNotExist(statErr)
	for attempt := 1; ; attempt++ {
		args := Args(t, dataPath, extra...)
		cfg, _, err := node.LoadConfig(args, func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		// As cmd/node does, so PUT /config/log_level works in process too.
		cfg.LevelVar = new(slog.LevelVar)
		cfg.LevelVar.Set(cfg.SlogLevel())
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: cfg.LevelVar}))
		}
		n, err := node.Start(ctx, cfg, log)
		cancel()
		if errors.Is(err, syscall.EADDRINUSE) && attempt < 5 {
			if freshEtcd {
				// etcd remembers the peer address it was created with.
				os.RemoveAll(etcdDir)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return &Node{Node: n, DataPath: dataPath, Args: args}
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// URL is an absolute URL on the node's HTTP API.
func (n *Node) URL(pathAndQuery string) string {
	return "http://" + n.HTTPAddr() + pathAndQuery
}

// Post POSTs body to the node's HTTP API and returns status and body.
func (n *Node) Post(t testing.TB, pathAndQuery, body string) (int, string) {
	t.Helper()
	return Post(t, n.HTTPAddr(), pathAndQuery, body)
}

// Get GETs from the node's HTTP API and returns status and body.
func (n *Node) Get(t testing.TB, pathAndQuery string) (int, string) {
	t.Helper()
	resp, err := http.Get(n.URL(pathAndQuery))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Eventually polls cond until it holds or the deadline passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
