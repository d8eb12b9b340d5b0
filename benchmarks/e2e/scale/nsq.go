package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// pubConn is a bare NSQ V2 producer connection. go-nsq's Producer cannot
// name a partition in PUB (youzan's `PUB <topic> <partition>`), and this
// needs nothing but PUB, its answers in order, and heartbeats.
type pubConn struct {
	c  net.Conn
	r  *bufio.Reader
	mu sync.Mutex // the writer and the reader's NOP share w
	w  *bufio.Writer
}

func dialNSQ(addr string, timeout time.Duration) (*pubConn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	p := &pubConn{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}
	if _, err := p.w.WriteString("  V2"); err != nil {
		c.Close()
		return nil, err
	}
	return p, nil
}

func (p *pubConn) Close() error { return p.c.Close() }

// writePub buffers one PUB; the caller holds p.mu and flushes.
func (p *pubConn) writePub(topic string, partition int, body []byte) error {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(body)))
	p.w.WriteString("PUB ")
	p.w.WriteString(topic)
	p.w.WriteByte(' ')
	p.w.WriteString(strconv.Itoa(partition))
	p.w.WriteByte('\n')
	p.w.Write(hdr[:])
	_, err := p.w.Write(body)
	return err
}

// readAnswer returns the next PUB answer: "" for OK, else the error
// frame's text. Heartbeats are answered with NOP and skipped. After a fatal
// error frame the server closes the connection, which the next read reports.
func (p *pubConn) readAnswer() (string, error) {
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(p.r, hdr[:]); err != nil {
			return "", err
		}
		size := binary.BigEndian.Uint32(hdr[:4])
		if size < 4 || size > 1<<20 {
			return "", fmt.Errorf("bad frame size %d", size)
		}
		data := make([]byte, size-4)
		if _, err := io.ReadFull(p.r, data); err != nil {
			return "", err
		}
		switch binary.BigEndian.Uint32(hdr[4:]) {
		case 0: // response
			if string(data) == "_heartbeat_" {
				p.mu.Lock()
				p.w.WriteString("NOP\n")
				err := p.w.Flush()
				p.mu.Unlock()
				if err != nil {
					return "", err
				}
				continue
			}
			if string(data) == "OK" {
				return "", nil
			}
			return "", fmt.Errorf("unexpected response %q", data)
		case 1: // error
			return string(data), nil
		default:
			return "", fmt.Errorf("unexpected frame type %d on a producer connection", binary.BigEndian.Uint32(hdr[4:]))
		}
	}
}
