package node_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/internal/testnode"
)

// A node whose partition files end in a torn commit record and a
// zero-padded segment (a crash mid-write, a disk that filled up) still
// starts and delivers everything that was committed.
func TestTornTailDoesNotStopStartup(t *testing.T) {
	dir := t.TempDir()
	n := testnode.StartIn(t, dir)
	prod, err := nsq.NewProducer(n.TCPAddr(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	var want []string
	for i := 0; i < 100; i++ {
		b := fmt.Sprintf("m%d", i)
		want = append(want, b)
		if err := prod.Publish("torn", []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	prod.Stop()
	n.Close()

	part := filepath.Join(dir, "topics", "torn", "0")
	appendTo(t, filepath.Join(part, "commit.log"), []byte{0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	segs, _ := filepath.Glob(filepath.Join(part, "*.log"))
	for _, s := range segs {
		if filepath.Base(s) != "commit.log" {
			appendTo(t, s, make([]byte, 4096))
		}
	}

	n2 := testnode.StartIn(t, dir)
	cfg := nsq.NewConfig()
	cfg.MaxInFlight = 50
	c, _ := nsq.NewConsumer("torn", "after", cfg)
	c.SetLoggerLevel(nsq.LogLevelError)
	col := &collector{seen: map[string]int{}}
	c.AddHandler(col)
	if err := c.ConnectToNSQD(n2.TCPAddr()); err != nil {
		t.Fatal(err)
	}
	defer func() { c.Stop(); <-c.StopChan }()
	testnode.Eventually(t, 10*time.Second, "every committed message after recovery", func() bool { return col.has(want) })
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
