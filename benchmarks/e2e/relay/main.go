// Command relay is the floor of a synchronously replicated write on one
// machine: the least a server can do and still answer a publish only once
// its followers have the message. It speaks just enough of NSQ's TCP
// protocol for bench_writer and the latency tool (IDENTIFY answered with a
// plain OK, PUB, MPUB, NOP), appends each command's body to a file with
// one write, sends it to every follower as one frame, and answers the
// client from the goroutine that read the last follower's ack. A follower
// reads a frame, appends it with one write and answers with its sequence
// number from the goroutine that read it. No actors, no commit log, no
// protobuf, no checks: what a replicated system spends beyond this on the
// same workload is its own; what this spends is the machine's.
//
//	relay --tcp-address A --http-address H --data-path D [--followers F1,F2]
//
// Without --followers it is a single server (the same floor unreplicated);
// a follower is a relay with --follow. The HTTP address answers /ping and
// accepts any POST, so run.sh can drive it as it drives the NSQ systems.
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	tcpAddr := flag.String("tcp-address", "127.0.0.1:4150", "address for clients, or for the leader when --follow")
	httpAddr := flag.String("http-address", "127.0.0.1:4151", "address answering /ping and any POST")
	dataPath := flag.String("data-path", ".", "directory of the log file")
	followers := flag.String("followers", "", "comma-separated addresses of the followers")
	follow := flag.Bool("follow", false, "be a follower: accept frames from a leader on --tcp-address")
	flag.Parse()

	logf, err := os.OpenFile(filepath.Join(*dataPath, "relay.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *tcpAddr)
	if err != nil {
		log.Fatal(err)
	}
	go serveHTTP(*httpAddr)

	if *follow {
		go acceptLoop(ln, func(c net.Conn) { followFrames(c, logf) })
	} else {
		var peers []*peer
		for _, addr := range strings.Split(*followers, ",") {
			if addr == "" {
				continue
			}
			p, err := dialPeer(addr)
			if err != nil {
				log.Fatal(err)
			}
			peers = append(peers, p)
		}
		go acceptLoop(ln, func(c net.Conn) { serveClient(c, logf, peers) })
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	ln.Close()
}

func serveHTTP(addr string) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OK") })
	log.Fatal(http.ListenAndServe(addr, h))
}

func acceptLoop(ln net.Listener, serve func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			serve(c)
		}()
	}
}

// client is one client connection's writing end: answers leave in the
// order their commands came, since every follower acks in that order.
type client struct {
	mu  sync.Mutex
	c   net.Conn
	buf []byte
}

func (cl *client) answer(frameType uint32, data string) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.buf = binary.BigEndian.AppendUint32(cl.buf[:0], uint32(4+len(data)))
	cl.buf = binary.BigEndian.AppendUint32(cl.buf, frameType)
	cl.buf = append(cl.buf, data...)
	cl.c.Write(cl.buf)
}

func serveClient(c net.Conn, logf *os.File, peers []*peer) {
	r := bufio.NewReaderSize(c, 16*1024)
	magic := make([]byte, 4)
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != "  V2" {
		return
	}
	cl := &client{c: c}
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			return
		}
		name, _, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
		switch name {
		case "NOP":
			continue
		case "IDENTIFY", "PUB", "MPUB":
		default:
			cl.answer(1, "E_INVALID "+name)
			return
		}
		body, err := readBody(r)
		if err != nil {
			return
		}
		if name == "IDENTIFY" {
			cl.answer(0, "OK")
			continue
		}
		if _, err := logf.Write(body); err != nil {
			cl.answer(1, "E_PUB_FAILED "+err.Error())
			return
		}
		if len(peers) == 0 {
			cl.answer(0, "OK")
			continue
		}
		w := &write{cl: cl, left: len(peers)}
		for _, p := range peers {
			if err := p.send(w, body); err != nil {
				log.Fatal(err)
			}
		}
	}
}

func readBody(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, errors.New("body too large")
	}
	body := make([]byte, n)
	_, err := io.ReadFull(r, body)
	return body, err
}

// write is one client command on its way to the followers.
type write struct {
	mu   sync.Mutex
	cl   *client
	left int // followers yet to ack
}

func (w *write) acked() {
	w.mu.Lock()
	w.left--
	done := w.left == 0
	w.mu.Unlock()
	if done {
		w.cl.answer(0, "OK")
	}
}

// peer is the leader's connection to one follower. Frames are a 4-byte
// length and the body; acks are 8-byte sequence numbers, in order.
type peer struct {
	mu      sync.Mutex
	c       net.Conn
	next    uint64
	pending map[uint64]*write
	buf     []byte
}

// dialPeer connects to a follower, which may still be starting.
func dialPeer(addr string) (*peer, error) {
	var c net.Conn
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c, err = net.Dial("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("follower %s: %w", addr, err)
	}
	p := &peer{c: c, pending: make(map[uint64]*write)}
	go p.readAcks()
	return p, nil
}

func (p *peer) send(w *write, body []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	p.pending[p.next] = w
	p.buf = binary.BigEndian.AppendUint32(p.buf[:0], uint32(len(body)))
	p.buf = append(p.buf, body...)
	_, err := p.c.Write(p.buf)
	return err
}

// readAcks completes every write up to each cumulative ack.
func (p *peer) readAcks() {
	r := bufio.NewReader(p.c)
	var b [8]byte
	var done uint64
	var ws []*write
	for {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			// A follower stopping; the writes it holds are never answered.
			log.Printf("follower %s: %v", p.c.RemoteAddr(), err)
			return
		}
		seq := binary.BigEndian.Uint64(b[:])
		p.mu.Lock()
		for ; done < seq; done++ {
			ws = append(ws, p.pending[done+1])
			delete(p.pending, done+1)
		}
		p.mu.Unlock()
		for _, w := range ws {
			w.acked()
		}
		ws = ws[:0]
	}
}

func followFrames(c net.Conn, logf *os.File) {
	r := bufio.NewReaderSize(c, 64*1024)
	var seq uint64
	var ack [8]byte
	for {
		body, err := readBody(r)
		if err != nil {
			return
		}
		if _, err := logf.Write(body); err != nil {
			log.Fatal(err)
		}
		seq++
		if r.Buffered() > 0 {
			continue // one cumulative ack for what arrived together
		}
		binary.BigEndian.PutUint64(ack[:], seq)
		if _, err := c.Write(ack[:]); err != nil {
			return
		}
	}
}
