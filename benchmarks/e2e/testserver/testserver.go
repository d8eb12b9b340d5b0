// Package testserver runs the fake servers the e2e tools' tests publish
// to: a loopback listener, and answers written in order once due, as a
// server that takes a while over each request answers them.
package testserver

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Start serves every connection to a free loopback port with serve until
// the test ends, and returns the port's address.
func Start(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// Answers writes to a connection in the order it is given answers, each
// no earlier than it is due.
type Answers struct {
	queue chan answer
}

type answer struct {
	due time.Time
	b   []byte
}

// NewAnswers starts writing to c; Close stops it.
func NewAnswers(c net.Conn) *Answers {
	a := &Answers{queue: make(chan answer, 1<<16)}
	go func() {
		for ans := range a.queue {
			time.Sleep(time.Until(ans.due)) // the simulated server's work, not synchronisation
			if _, err := c.Write(ans.b); err != nil {
				return
			}
		}
	}()
	return a
}

// After writes b once delay has passed and every earlier answer is written.
func (a *Answers) After(delay time.Duration, b []byte) {
	a.queue <- answer{due: time.Now().Add(delay), b: b}
}

func (a *Answers) Close() { close(a.queue) }
