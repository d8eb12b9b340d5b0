package protocol_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/protocol"
)

// nsqjsDir holds the Node project that pins nsqjs; its node_modules is not
// committed.
var nsqjsDir = filepath.Join("..", "tests", "nsqjs")

var (
	nsqjsOnce sync.Once
	nsqjsErr  error
)

// nsqjsInstalled installs the locked nsqjs with npm ci unless a finished
// install is there: npm writes node_modules/.package-lock.json last, so an
// interrupted install is redone rather than trusted. A machine without
// Node.js fails the test: the client is part of what is tested.
func nsqjsInstalled(t *testing.T) {
	t.Helper()
	nsqjsOnce.Do(func() {
		for _, tool := range []string{"node", "npm"} {
			if _, err := exec.LookPath(tool); err != nil {
				nsqjsErr = err
				return
			}
		}
		if _, err := os.Stat(filepath.Join(nsqjsDir, "node_modules", ".package-lock.json")); err == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = nsqjsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			nsqjsErr = &installError{err, out}
		}
	})
	if nsqjsErr != nil {
		t.Fatalf("nsqjs 0.13.0 in %s is needed (Node.js and npm on PATH): %v", nsqjsDir, nsqjsErr)
	}
}

type installError struct {
	err error
	out []byte
}

func (e *installError) Error() string { return "npm ci: " + e.err.Error() + "\n" + string(e.out) }

// nsqjs 0.13.0, which knows nothing of headers, consumes an ext topic's
// messages as plain bodies: those published with a JSON header, with a
// dispatch tag no consumer desires, without a header in MPUB_EXT, and by a
// plain PUB. Each arrives once, byte for byte, and its FIN empties the
// channel.
func TestNSQJSConsumesExtTopic(t *testing.T) {
	nsqjsInstalled(t)
	n := startNode(t)
	createExt(t, n, "extjs", "plain", "aware")

	binary := "\x00\x01\xff\xfe{\"k\":\"v\"}"
	p := dial(t, n)
	p.send("PUB_EXT extjs 0", extBody(`{"k":"v","n":1}`, "with a header"))
	p.response(protocol.ResponseOK)
	p.send("PUB_EXT extjs", extBody(`{"##client_dispatch_tag":"t1"}`, "tagged"))
	p.response(protocol.ResponseOK)
	p.send("MPUB_EXT extjs", mpubBody(extBody("", "no header"), extBody(`{"k":"w"}`, binary)))
	p.response(protocol.ResponseOK)
	p.pub("extjs", []byte("plain pub"))
	want := []string{"with a header", "tagged", "no header", binary, "plain pub"}

	// The headers are stored: an ext-aware consumer reads them back, so
	// nsqjs's plain bodies below are the node leaving them out.
	aware := identifyExt(t, n, "extjs", "aware", "")
	headers := map[string]string{}
	for range want {
		m := aware.youzanMessage(true, false)
		headers[string(m.Body)] = string(m.Header)
	}
	if headers["with a header"] != `{"k":"v","n":1}` || headers["tagged"] != `{"##client_dispatch_tag":"t1"}` || headers[binary] != `{"k":"w"}` ||
		headers["no header"] != "" || headers["plain pub"] != "" {
		t.Fatalf("ext-aware consumer read headers %q", headers)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "consume.js", n.TCPAddr(), "extjs", "plain", strconv.Itoa(len(want)), "30000")
	cmd.Dir = nsqjsDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node consume.js: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var got []string
	for _, line := range strings.Fields(stdout.String()) {
		b, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			t.Fatalf("consume.js printed %q: %v", line, err)
		}
		got = append(got, string(b))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("nsqjs got %q, want %q", got, want)
	}
	waitStats(t, n, "extjs", "plain", "nsqjs's FINs applied", func(cs chanStats) bool { return cs.Depth == 0 && cs.InFlight == 0 })
}
