package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/benchmarks/e2e/testserver"
)

// fakeServer speaks just enough of the NATS client protocol for JetStream
// publishes: it answers each PUB with a reply subject after delay, with a
// PubAck or, when refuse is set, a JetStream error, as a stream leader does.
type fakeServer struct {
	addr   string
	delay  time.Duration
	refuse bool
	pubs   atomic.Int64 // PUBs with a reply subject to stream
	bodies sync.Map     // body length → struct{}
}

func startFakeServer(t *testing.T, delay time.Duration) *fakeServer {
	f := &fakeServer{delay: delay}
	f.addr = testserver.Start(t, f.serve)
	return f
}

func (f *fakeServer) url() string { return "nats://" + f.addr }

func (f *fakeServer) serve(c net.Conn) {
	answers := testserver.NewAnswers(c)
	defer answers.Close()
	answers.After(0, []byte(`INFO {"server_id":"FAKE","server_name":"fake","version":"2.15.2","proto":1,"headers":true,"max_payload":1048576,"jetstream":true}`+"\r\n"))
	subs := map[string]string{} // sid → subject, a trailing "*" matching one token
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		args := strings.Fields(line)
		if len(args) == 0 {
			continue
		}
		switch strings.ToUpper(args[0]) {
		case "CONNECT", "PONG":
		case "PING":
			answers.After(0, []byte("PONG\r\n"))
		case "SUB":
			subs[args[len(args)-1]] = args[1]
		case "UNSUB":
			delete(subs, args[1])
		case "PUB":
			size, err := strconv.Atoi(args[len(args)-1])
			if err != nil {
				return
			}
			if _, err := io.CopyN(io.Discard, r, int64(size)+2); err != nil {
				return
			}
			if len(args) != 4 {
				continue
			}
			n := f.pubs.Add(1)
			f.bodies.Store(size, struct{}{})
			ack := fmt.Sprintf(`{"stream":%q,"seq":%d}`, args[1], n)
			if f.refuse {
				ack = `{"error":{"code":503,"err_code":10077,"description":"refused by the fake"}}`
			}
			for sid, subject := range subs {
				if matches(subject, args[2]) {
					answers.After(f.delay, fmt.Appendf(nil, "MSG %s %s %d\r\n%s\r\n", args[2], sid, len(ack), ack))
					break
				}
			}
		default:
			return
		}
	}
}

func matches(pattern, subject string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		rest, ok := strings.CutPrefix(subject, prefix)
		return ok && rest != "" && !strings.Contains(rest, ".")
	}
	return pattern == subject
}
