package cluster

import (
	"context"
	"testing"
	"time"
)

// A tombstone is seen cluster-wide until taken once or until its lease
// lapses.
func TestTombstones(t *testing.T) {
	e, _ := startTestEtcd(t, t.TempDir())
	cli := e.Client()
	ctx := context.Background()
	const prefix = "/p/"

	if err := PutTombstone(ctx, cli, prefix, "orders", "10.0.0.1:4151", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := PutTombstone(ctx, cli, prefix, "orders", "10.0.0.2:4151", time.Second); err != nil {
		t.Fatal(err)
	}
	marks, err := Tombstones(ctx, cli, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 2 || !marks["10.0.0.1:4151"]["orders"] || !marks["10.0.0.2:4151"]["orders"] {
		t.Fatalf("tombstones %v, want orders on both nodes", marks)
	}
	if others, _ := Tombstones(ctx, cli, "/elsewhere/"); len(others) != 0 {
		t.Fatalf("tombstones under another prefix: %v", others)
	}

	for i, want := range []bool{true, false} {
		taken, err := TakeTombstone(ctx, cli, prefix, "orders", "10.0.0.1:4151")
		if err != nil || taken != want {
			t.Fatalf("take #%d: %v %v, want %v", i+1, taken, err, want)
		}
	}
	// The one-second lease lapses on its own (etcd checks leases every
	// 500ms, then revokes through raft).
	if !eventually(t, 3*time.Second, func() bool {
		marks, err := Tombstones(ctx, cli, prefix)
		return err == nil && len(marks) == 0
	}) {
		t.Fatal("a tombstone outlived its lease")
	}
}
