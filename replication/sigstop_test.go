//go:build unix

package replication

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStoppedFollowerProcessReportedDown stops a real follower process with
// SIGSTOP: its kernel keeps the TCP connection open and even acknowledges
// data, so only the missing heartbeats can tell.
func TestStoppedFollowerProcessReportedDown(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill() // SIGKILL ends a stopped process too
		cmd.Wait()
	})
	addrc := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addrc <- strings.TrimSpace(line)
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(30 * time.Second):
		t.Fatal("follower process did not start")
	}
	if addr == "" {
		t.Fatal("follower process printed no address")
	}

	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{NodeID: "leader"})
	if err := s.Send(writeFrame(1, 200)); err != nil {
		t.Fatal(err)
	}
	l.nextAck(t)

	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Writes sent meanwhile must neither block nor hide the silence.
	if err := s.Send(writeFrame(2, 200)); err != nil {
		t.Fatal(err)
	}
	err = l.waitDown(t, 10*time.Second)
	elapsed := time.Since(stopped)
	if !errors.Is(err, ErrSilent) {
		t.Fatalf("down with %v, want ErrSilent", err)
	}
	if !raceEnabled && elapsed >= time.Second {
		t.Fatalf("stopped follower reported down after %v, want under 1s", elapsed)
	}
	t.Logf("SIGSTOPped follower reported down %v after the signal", elapsed)
	if err := s.Send(writeFrame(3, 200)); !errors.Is(err, ErrSilent) {
		t.Fatalf("Send after down: %v, want ErrSilent", err)
	}
}
