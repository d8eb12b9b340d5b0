package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs the whole driver against a real three-node cluster with 8
// partitions and short phases: it checks the driver works end to end, not
// the figures. NODE_BIN skips building the node from this checkout.
func TestSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "8", "--failover-timeout", "30s")
	if res.Create.WithLeader != 8 || res.Load.Acked == 0 || res.Failover.Recovered != res.Failover.Leaders || res.Failover.Leaders == 0 {
		t.Errorf("unexpected result %+v", res)
	}
	for _, n := range res.Nodes {
		if n.Goroutines <= 0 || n.FDs <= 0 || n.RSSMiB <= 0 || n.IdleCPUPct < 0 {
			t.Errorf("node %d figures missing: %+v", n.Node, n)
		}
	}
}

// TestMoveSmoke runs the move phase at 8 MiB, moved at 4 MB/s so the
// 1-second load lies within it.
func TestMoveSmoke(t *testing.T) {
	res := runSmoke(t, "--partitions", "4", "--skip-failover", "--load-duration", "1s",
		"--move-mib", "8", "--node-args", "--catchup-rate-limit 4000000")
	m := res.Move
	if m.Seconds < 1 || !m.LoadWithin || m.From == "" || m.To == "" || m.From == m.To || m.Load.Acked == 0 || res.Load.Acked == 0 {
		t.Errorf("unexpected move figures %+v", m)
	}
}

// runSmoke runs the driver on a node built from this checkout (or NODE_BIN)
// with short phases and the given flags, and returns the run's JSON.
func runSmoke(t *testing.T, flags ...string) runResult {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	bin := os.Getenv("NODE_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "partita")
		build := exec.Command("go", "build", "-o", bin, "./cmd/node")
		build.Dir = filepath.Join("..", "..", "..")
		build.Env = append(os.Environ(), "GOWORK=off")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the node: %v\n%s", err, out)
		}
	}
	args := append([]string{"--node-bin", bin, "--label", "smoke", "--settle", "500ms", "--idle-window", "2s",
		"--load-rate", "500", "--load-duration", "2s", "--workdir", t.TempDir()}, flags...)
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	ok, err := runAll(ctx, cfg, &out)
	t.Log(out.String())
	if err != nil || !ok {
		t.Fatalf("run failed: ok %v, err %v", ok, err)
	}
	var res runResult
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "{") {
			if err := json.Unmarshal([]byte(line), &res); err != nil {
				t.Fatal(err)
			}
		}
	}
	return res
}
