package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/nsqio/go-nsq"
)

// A publish is answered once both followers have it: after go-nsq's
// Publish and MultiPublish return, the leader's file and each follower's
// hold every body, in order.
func TestPublishesReachEveryFollowerBeforeTheAnswer(t *testing.T) {
	files := make([]*os.File, 3)
	for i := range files {
		f, err := os.Create(filepath.Join(t.TempDir(), "relay.log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		files[i] = f
	}
	var peers []*peer
	for _, f := range files[1:] {
		ln := listen(t)
		go acceptLoop(ln, func(c net.Conn) { followFrames(c, f) })
		p, err := dialPeer(ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.c.Close() })
		peers = append(peers, p)
	}
	ln := listen(t)
	go acceptLoop(ln, func(c net.Conn) { serveClient(c, files[0], peers) })

	prod, err := nsq.NewProducer(ln.Addr().String(), nsq.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	prod.SetLoggerLevel(nsq.LogLevelError)
	defer prod.Stop()
	var want bytes.Buffer
	for i := range 100 {
		body := fmt.Appendf(nil, "m%03d", i)
		if err := prod.Publish("t", body); err != nil {
			t.Fatal(err)
		}
		want.Write(body)
	}
	if err := prod.MultiPublish("t", [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	mpub := want.Len()
	for i, f := range files {
		got, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		// An MPUB's body is appended as it came: a count, then each
		// message with its size.
		if len(got) <= mpub || !bytes.Equal(got[:mpub], want.Bytes()) {
			t.Fatalf("file %d holds %q after the answers, want %q and the MPUB", i, got, want.Bytes())
		}
	}
}

func listen(t *testing.T) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
