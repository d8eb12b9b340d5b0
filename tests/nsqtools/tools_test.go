package nsqtools

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The command-line tools against one cluster: to_nsq publishes from stdin
// to one node, nsq_tail and nsq_to_file find every partition's leader
// through another node's /lookup and receive everything, and nsq_stat
// reports the channel's rates.
func TestCommandLineTools(t *testing.T) {
	nodes := startCluster(t)
	const topic = "tools"
	createTopic(t, nodes, topic, "tail", "tofile", "stat")

	var want []string
	for i := range 30 {
		want = append(want, "line-"+strconv.Itoa(i))
	}
	t.Run("to_nsq", func(t *testing.T) {
		p := start(t, strings.NewReader(strings.Join(want, "\n")+"\n"), "to_nsq",
			"--topic", topic, "--nsqd-tcp-address", nodes[1].tcp)
		p.wait(t, waitFor)
		eventually(t, "every channel holds the 30 lines", func() bool {
			for _, c := range []string{"tail", "tofile", "stat"} {
				if channelDepth(t, nodes, topic, c) != int64(len(want)) {
					return false
				}
			}
			return true
		})
	})

	t.Run("nsq_tail", func(t *testing.T) {
		p := start(t, nil, "nsq_tail", "--lookupd-http-address", nodes[2].http,
			"--topic", topic, "--channel", "tail", "-n", strconv.Itoa(len(want)))
		p.wait(t, waitFor)
		// nsq_tail writes each body and its newline in two writes to
		// stdout, so a log line on stderr can land between them in a shared
		// buffer: stdout alone is read.
		var got []string
		for _, line := range strings.Split(p.stdout.String(), "\n") {
			if strings.HasPrefix(line, "line-") {
				got = append(got, line)
			}
		}
		expectSame(t, "nsq_tail printed", got, want)
	})

	t.Run("nsq_to_file", func(t *testing.T) {
		dir := t.TempDir()
		p := start(t, nil, "nsq_to_file", "--lookupd-http-address", nodes[0].http,
			"--topic", topic, "--channel", "tofile", "--output-dir", dir, "--sync-interval", "100ms")
		eventually(t, "nsq_to_file wrote the 30 lines", func() bool {
			return len(fileLines(t, dir)) == len(want)
		})
		p.stop(waitFor)
		if p.err != nil {
			t.Fatalf("nsq_to_file: %v\n%s", p.err, p.out)
		}
		expectSame(t, "nsq_to_file wrote", fileLines(t, dir), want)
		eventually(t, "the channel is drained", func() bool { return channelDepth(t, nodes, topic, "tofile") == 0 })
	})

	t.Run("nsq_stat", func(t *testing.T) {
		// Two reports half a second apart, each a rate over the interval;
		// messages published meanwhile make the first one's ingress > 0.
		p := start(t, nil, "nsq_stat", "--lookupd-http-address", nodes[1].http,
			"--topic", topic, "--channel", "stat", "--interval", "500ms", "--count", "2")
		publishUntilDone(t, nodes, topic, p)
		if p.err != nil {
			t.Fatalf("nsq_stat: %v\n%s", p.err, p.out)
		}
		t.Logf("nsq_stat output:\n%s", p.out)
		rows := statRows(p.out.String())
		if len(rows) == 0 {
			t.Fatalf("nsq_stat printed no report:\n%s", p.out)
		}
		ingress := 0
		for _, r := range rows {
			ingress = max(ingress, r.ingress)
			if r.total < len(want) || r.msgs < len(want) {
				t.Errorf("nsq_stat row %+v: depth and messages should count the %d lines to_nsq sent", r, len(want))
			}
		}
		if ingress == 0 {
			t.Fatalf("nsq_stat saw no ingress while messages were published:\n%s", p.out)
		}
	})
}

// publishUntilDone publishes one message a few milliseconds apart, to each
// node in turn, until p exits.
func publishUntilDone(t *testing.T, nodes []*node, topic string, p *process) {
	t.Helper()
	deadline := time.After(waitFor)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.done:
			return
		case <-deadline:
			t.Fatalf("nsq_stat still running\n%s", p.out)
		case <-tick.C:
			mustPost(t, nodes[i%len(nodes)].http+"/pub?topic="+topic, fmt.Sprintf("stat-%d", i))
		}
	}
}

type statRow struct{ ingress, egress, total, msgs int }

// statRows parses nsq_stat's report lines:
// "ingress egress | total mem disk inflt def | req t-o msgs clients".
func statRows(out string) []statRow {
	var rows []statRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(strings.NewReplacer("|", " ").Replace(line))
		if len(f) != 11 {
			continue
		}
		n := make([]int, len(f))
		ok := true
		for i, s := range f {
			v, err := strconv.Atoi(s)
			if err != nil {
				ok = false
				break
			}
			n[i] = v
		}
		if ok {
			rows = append(rows, statRow{ingress: n[0], egress: n[1], total: n[2], msgs: n[9]})
		}
	}
	return rows
}

// fileLines reads every line of every file nsq_to_file left in dir.
func fileLines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

// expectSame compares as sets with multiplicity: partitions deliver in
// their own order.
func expectSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	got, want = slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%s %d lines %v, want %d lines %v", what, len(got), got, len(want), want)
	}
}
