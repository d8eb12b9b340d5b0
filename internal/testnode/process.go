package testnode

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a node running as its own process.
type Process struct {
	Cmd      *exec.Cmd
	DataPath string
	TCP      string
	HTTP     string
	Log      *Output
	done     chan struct{}
	err      error
}

// Output is what a process wrote to stdout and stderr; a test may read it
// while the process runs.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(b)
}

// String is what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// Bytes is a copy of what was written so far.
func (o *Output) Bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf.Bytes())
}

// built is each program built for this test binary, by package path.
var built sync.Map // string -> *build

type build struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// Run runs a test binary's tests and removes the programs they built,
// which would otherwise stay in the temporary directory after each run:
// a TestMain's `os.Exit(testnode.Run(m))`.
func Run(m *testing.M) int {
	code := m.Run()
	built.Range(func(_, v any) bool {
		if b := v.(*build); b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
		return true
	})
	return code
}

// Binary builds cmd/node once per test binary and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	return program(t, "./cmd/node", "partita")
}

// Program builds the main package pkg, a path from the module's root,
// once per test binary and returns its path. It is built without the race
// detector whatever the test binary was built with.
func Program(t testing.TB, pkg string) string {
	t.Helper()
	return program(t, pkg, filepath.Base(pkg))
}

func program(t testing.TB, pkg, name string) string {
	t.Helper()
	v, _ := built.LoadOrStore(pkg, &build{})
	b := v.(*build)
	b.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dir, err := os.MkdirTemp("", "partita-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Dir = root
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, b.err, b.out)
	}
	return b.path
}

// StartProcess runs the node binary over dataPath and waits for /ping. The
// process is killed when the test ends if still running.
// A start that loses one of its ports to another socket is retried on
// fresh ports.
func StartProcess(t testing.TB, dataPath string, extra ...string) *Process {
	t.Helper()
	etcdDir := filepath.Join(dataPath, "etcd")
	_, statErr := os.Stat(etcdDir)
	freshEtcd := os.IsNotExist(statErr)
	for attempt := 1; ; attempt++ {
		p, portTaken := startProcess(t, dataPath, extra...)
		if p != nil {
			return p
		}
		if !portTaken || attempt == 5 {
			t.Fatal("node did not start")
		}
		if freshEtcd {
			os.RemoveAll(etcdDir)
		}
	}
}

// StartProcessIn runs the node binary inside the network namespace netns
// with exactly args (addresses included), and waits for /ping.
func StartProcessIn(t testing.TB, netns, dataPath string, args ...string) *Process {
	t.Helper()
	p, _ := launch(t, []string{"ip", "netns", "exec", netns}, dataPath, args)
	if p == nil {
		t.Fatal("node did not start")
	}
	return p
}

// StartProcessWrapped runs the node binary behind wrapper, a command that
// execs it in place (prlimit, setpriv), and waits for /ping.
func StartProcessWrapped(t testing.TB, wrapper []string, dataPath string, extra ...string) *Process {
	t.Helper()
	p, _ := launch(t, wrapper, dataPath, Args(t, dataPath, extra...))
	if p == nil {
		t.Fatal("node did not start")
	}
	return p
}

func startProcess(t testing.TB, dataPath string, extra ...string) (*Process, bool) {
	t.Helper()
	return launch(t, nil, dataPath, Args(t, dataPath, extra...))
}

// launch runs the binary, behind wrapper when given (which must exec it in
// place, so signals reach the node).
func launch(t testing.TB, wrapper []string, dataPath string, args []string) (*Process, bool) {
	t.Helper()
	p := &Process{DataPath: dataPath, Log: &Output{}, done: make(chan struct{})}
	for i := 0; i < len(args)-1; i++ {
		switch args[i] {
		case "--tcp-address":
			p.TCP = args[i+1]
		case "--http-address":
			p.HTTP = args[i+1]
		}
	}
	argv := append(append(slices.Clone(wrapper), Binary(t)), args...)
	p.Cmd = exec.Command(argv[0], argv[1:]...)
	p.Cmd.Stdout, p.Cmd.Stderr = p.Log, p.Log
	if err := p.Cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Cmd.Process.Kill()
		<-p.done
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + p.HTTP + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p, false
			}
		}
		select {
		case <-p.done:
			if strings.Contains(p.Log.String(), "address already in use") {
				return nil, true
			}
			t.Fatalf("node exited at start: %v\n%s", p.err, p.Log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("node did not answer /ping\n%s", p.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill ends the process with SIGKILL and waits for it.
func (p *Process) Kill(t testing.TB) {
	p.Cmd.Process.Kill()
	<-p.done
}

// Terminate sends SIGTERM and waits up to within for a clean exit.
func (p *Process) Terminate(t testing.TB, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("node did not stop within %v after SIGTERM\n%s", within, p.Log)
	}
	if p.err != nil {
		t.Fatalf("node exited with %v after SIGTERM\n%s", p.err, p.Log)
	}
	return time.Since(start)
}
