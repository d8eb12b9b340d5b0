package nsqtools

import (
	"context"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// artifactDir is where screenshots are kept after the test: $ARTIFACTS if
// set, else /tmp/partita-artifacts.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "partita-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts headless Chromium (Debian's package; scripts/test.sh
// installs it) for the test's duration.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		var err error
		if path, err = exec.LookPath("chromium"); err != nil {
			t.Fatal("chromium is not installed (apt-get install -y chromium, or set CHROMIUM)")
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // Chromium refuses to run as root with its sandbox
		chromedp.WindowSize(1280, 1000),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(quietErrorf))
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*waitFor)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// Chromium renders nsqadmin's pages for the cluster: the topic page shows
// the channel with its depth over every partition, the nodes page shows
// the three nodes. Screenshots of both are saved.
func TestNSQAdminBrowser(t *testing.T) {
	nodes, admin := startAdmin(t)
	ctx := browser(t)
	dir := artifactDir(t)

	// The depth cell of the channel's row in "Channel Message Queues".
	const depthJS = `(() => {
		for (const a of document.querySelectorAll('table tr th a.link')) {
			if (a.textContent.trim() === '` + adminChannel + `') {
				const td = a.closest('tr').querySelector('td');
				return td ? td.textContent.trim() : '';
			}
		}
		return '';
	})()`
	if err := chromedp.Run(ctx, chromedp.Navigate("http://"+admin+"/topics/"+adminTopic)); err != nil {
		t.Fatal(err)
	}
	var depth string
	pollPage(t, ctx, "the topic page shows the channel "+adminChannel+" at depth "+strconv.Itoa(adminMessages), func() bool {
		if err := chromedp.Run(ctx, chromedp.Evaluate(depthJS, &depth)); err != nil {
			t.Fatal(err)
		}
		return depth == strconv.Itoa(adminMessages)
	})
	screenshot(t, ctx, filepath.Join(dir, "nsqadmin-topic.png"))

	if err := chromedp.Run(ctx, chromedp.Navigate("http://"+admin+"/nodes")); err != nil {
		t.Fatal(err)
	}
	var text string
	pollPage(t, ctx, "the nodes page lists the three nodes", func() bool {
		if err := chromedp.Run(ctx, chromedp.Evaluate(`document.body.innerText`, &text)); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			_, port, _ := strings.Cut(n.http, ":")
			if !strings.Contains(text, port) {
				return false
			}
		}
		return true
	})
	screenshot(t, ctx, filepath.Join(dir, "nsqadmin-nodes.png"))
}

// quietErrorf drops the decoding errors chromedp reports for event fields
// newer than its protocol definitions (Chromium is Debian's current one);
// they concern events the test does not use.
func quietErrorf(format string, args ...any) {
	if strings.HasPrefix(format, "could not unmarshal event") {
		return
	}
	log.Printf(format, args...)
}

// pollPage polls cond on the rendered page until it holds.
func pollPage(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for ; !cond(); <-tick.C {
		if time.Now().After(deadline) {
			var html string
			chromedp.Run(ctx, chromedp.OuterHTML("body", &html))
			t.Fatalf("timed out waiting until %s; page:\n%.3000s", what, html)
		}
	}
}

func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	var png []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
