package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestUsageAndHelp(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantOut  string // in stdout or stderr
	}{
		{nil, 0, "Commands:"},
		{[]string{"help"}, 0, "drain"},
		{[]string{"help", "move"}, 0, "Usage: partitactl move TOPIC PARTITION --from NODE --to NODE"},
		{[]string{"move", "-h"}, 0, "-no-wait"},
		{[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{[]string{"move", "orders"}, exitUsage, "move takes 2 argument(s), got 1"},
		{[]string{"move", "orders", "zero", "--from", "n1", "--to", "n2"}, exitUsage, `PARTITION must be a whole number, not "zero"`},
		{[]string{"move", "orders", "0", "--from", "n1"}, exitUsage, "move needs --from and --to"},
		{[]string{"--node", " , ", "nodes"}, exitUsage, "no node to ask"},
		{[]string{"nodes", "--bogus"}, exitUsage, "flag provided but not defined: -bogus"},
		{[]string{"nodes", "--bind", "not-an-ip"}, exitUsage, `--bind "not-an-ip" is not an IP address`},
	} {
		var out, errOut bytes.Buffer
		c := &cli{out: &out, errOut: &errOut, getenv: func(string) string { return "" }}
		code := c.main(tc.args)
		if code != tc.wantCode || !strings.Contains(out.String()+errOut.String(), tc.wantOut) {
			t.Errorf("partitactl %q: exit %d, output\n%s%s\nwant exit %d with %q", tc.args, code, out.String(), errOut.String(), tc.wantCode, tc.wantOut)
		}
	}
}

// scripted answers a follower's polls from a list of readings, the last
// one ending the operation.
func scripted(rs ...reading) poll {
	i := 0
	return func(context.Context) (reading, bool, error) {
		r := rs[i]
		i++
		return r, i == len(rs), nil
	}
}

func TestFollowerOutput(t *testing.T) {
	t0 := time.Now()
	rs := []reading{
		{at: t0, done: 0, total: 4, unit: unitReplicas, phase: phaseDraining},
		{at: t0.Add(time.Second), done: 0, total: 4, unit: unitReplicas, phase: phaseDraining},
		{at: t0.Add(2 * time.Second), done: 2, total: 4, unit: unitReplicas, phase: phaseDraining},
		{at: t0.Add(3 * time.Second), done: 4, total: 4, unit: unitReplicas, phase: phaseRemovable},
	}
	var plain bytes.Buffer
	f := follower{out: &plain, interval: time.Millisecond, quiet: time.Hour, title: "drain n4"}
	if err := f.run(context.Background(), scripted(rs...)); err != nil {
		t.Fatal(err)
	}
	want := "drain n4   0%  0/4 replicas  draining\n" +
		"drain n4  50%  2/4 replicas  eta 2s  draining\n" +
		"drain n4 100%  4/4 replicas  removable\n"
	if plain.String() != want {
		t.Fatalf("plain lines:\n%s\nwant a line only when the figures change:\n%s", plain.String(), want)
	}

	var term bytes.Buffer
	f.out, f.tty = &term, true
	if err := f.run(context.Background(), scripted(rs...)); err != nil {
		t.Fatal(err)
	}
	got := term.String()
	last := got[strings.LastIndex(got, "\r")+1:]
	// The last line is padded to cover the longer one it replaces.
	if strings.Count(got, "\r") != len(rs) || strings.Count(got, "\n") != 1 ||
		last != "drain n4 [########################] 100%  4/4 replicas  removable       \n" {
		t.Fatalf("terminal output %q: want the bar redrawn in place at each reading and one newline at the end", got)
	}
}

// A whole move, copy, hand-off and removal, on one bar that only grows,
// with an ETA on every line from the first one that measured a pace,
// through the steps after the copy too.
func TestFollowerOutputOfAWholeMove(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mv := func(s int, phase string, copied, copyTotal int64) reading {
		return reading{at: at(s), done: moveDone(phase, copied, copyTotal), total: 1, unit: unitMove, phase: phase, copied: copied, copyTotal: copyTotal}
	}
	rs := []reading{
		mv(0, phaseAdding, 0, 0), // the target has not opened the partition
		mv(1, phaseAdding, 0, 8<<20),
		mv(2, phaseAdding, 2<<20, 8<<20),
		mv(3, phaseAdding, 2<<20, 8<<20), // the copy waits for the rate limit
		mv(4, phaseAdding, 6<<20, 8<<20),
		mv(5, phaseAdding, 8<<20, 8<<20),
		mv(6, phaseHandOff, 0, 0),
		mv(8, phaseRemoving, 0, 0),
		mv(9, phaseDone, 0, 0),
	}
	var plain bytes.Buffer
	f := follower{out: &plain, interval: time.Millisecond, quiet: time.Hour, title: "orders/0 n2->n4"}
	if err := f.run(context.Background(), scripted(rs...)); err != nil {
		t.Fatal(err)
	}
	want := "orders/0 n2->n4   0%  adding\n" +
		"orders/0 n2->n4   0%  0 B/8.0 MiB copied  adding\n" +
		"orders/0 n2->n4  22%  2.0 MiB/8.0 MiB copied  eta 7s  adding\n" +
		"orders/0 n2->n4  68%  6.0 MiB/8.0 MiB copied  eta 2s  adding\n" +
		"orders/0 n2->n4  90%  8.0 MiB/8.0 MiB copied  eta 1s  adding\n" +
		"orders/0 n2->n4  93%  eta 1s  handing off\n" +
		"orders/0 n2->n4  96%  eta 1s  removing\n" +
		"orders/0 n2->n4 100%  done\n"
	if plain.String() != want {
		t.Fatalf("plain lines:\n%s\nwant:\n%s", plain.String(), want)
	}
}
