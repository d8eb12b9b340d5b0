package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partitamq/partita/internal/testnode"
)

// openFileLimits reads a process's soft and hard open-file limits.
func openFileLimits(t *testing.T, pid int) (soft, hard uint64) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "Max open files") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "Max open files"))
		soft, _ = strconv.ParseUint(f[0], 10, 64)
		hard, _ = strconv.ParseUint(f[1], 10, 64)
		return soft, hard
	}
	t.Fatal("no open-file limit in /proc/PID/limits")
	return 0, 0
}

// mayRaiseHardLimit reports whether this process has CAP_SYS_RESOURCE,
// which raising a hard limit takes (containers often drop it, root or not).
func mayRaiseHardLimit(t *testing.T) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			const capSysResource = 24
			return caps&(1<<capSysResource) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// A node started with a low open-file limit raises it as far as the system
// allows: to fs.nr_open when it may raise its hard limit, else to the hard
// limit.
func TestNodeRaisesItsOpenFileLimit(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Fatalf("prlimit (util-linux) is needed: %v", err)
	}
	n := testnode.StartProcessWrapped(t, []string{"prlimit", "--nofile=512:2048", "--"}, t.TempDir())
	soft, hard := openFileLimits(t, n.Cmd.Process.Pid)
	if soft != hard {
		t.Fatalf("soft limit %d, hard %d: the soft limit was not raised", soft, hard)
	}
	b, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		t.Fatal(err)
	}
	ceiling, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	// prlimit keeps its capabilities for the node it execs.
	if mayRaiseHardLimit(t) && hard != ceiling {
		t.Fatalf("with CAP_SYS_RESOURCE, hard limit %d, want fs.nr_open %d", hard, ceiling)
	}
	if !mayRaiseHardLimit(t) && hard != 2048 {
		t.Fatalf("without CAP_SYS_RESOURCE, hard limit %d, want 2048", hard)
	}
}

// A node whose limit cannot cover the partitions it holds says so at
// start, naming the limit and what it needs.
func TestNodeWarnsOfAnOpenFileLimitTooLow(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed: %v", err)
	}
	dir := t.TempDir()
	n := testnode.StartProcess(t, dir)
	if code, body := testnode.Post(t, n.HTTP, "/topic/create?topic=many&partition_num=40", ""); code != 200 {
		t.Fatalf("creating the topic: %d %s", code, body)
	}
	n.Terminate(t, 30*time.Second)
	// Without CAP_SYS_RESOURCE the node cannot raise its hard limit, as an
	// unprivileged node could not.
	wrapper := []string{"prlimit", "--nofile=1100:1100", "--", "setpriv", "--bounding-set=-sys_resource", "--inh-caps=-sys_resource", "--"}
	n = testnode.StartProcessWrapped(t, wrapper, dir)
	// The check runs before the node answers /ping; the log is read once
	// the process has ended and written all of it.
	n.Terminate(t, 30*time.Second)
	log := n.Log.String()
	if !strings.Contains(log, "open-file limit is too low") {
		t.Fatalf("no warning of the open-file limit:\n%s", log)
	}
	if !strings.Contains(log, "partitions=40") || !strings.Contains(log, "limit=1100") {
		t.Fatalf("warning without the partitions or the limit:\n%s", log)
	}
}
