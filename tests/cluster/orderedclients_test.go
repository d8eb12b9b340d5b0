package cluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/protocol"
)

// nodeTCPs is the TCP address of every node registered in etcd now: a
// node restarted on new ports, or one that joined, is found there.
func (c *testCluster) nodeTCPs() []string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	nodes, err := cluster.Nodes(ctx, c.cli, "/partita/")
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.TCPAddress)
	}
	return out
}

// leaderTCP is the TCP address of the node etcd names the partition's
// leader, as that node registered it.
func (c *testCluster) leaderTCP(topic string, p int32) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	st, ok, err := c.assign.Get(ctx, topic, p)
	if err != nil || !ok || st.Leader == "" {
		return "", false
	}
	nodes, err := cluster.Nodes(ctx, c.cli, "/partita/")
	if err != nil {
		return "", false
	}
	for _, n := range nodes {
		if n.ID == st.Leader {
			return n.TCPAddress, true
		}
	}
	return "", false
}

// orderedStream is one partition of an ordered topic under test: a single
// producer numbers its messages o-0, o-1, ... and one SUB_ORDERED consumer
// follows the partition's leader; both record into h, whose check judges
// the order.
type orderedStream struct {
	c              *testCluster
	topic, channel string
	p              int32
	h              *history
	// maxAhead, when set, holds the producer while that many messages
	// wait for their first delivery: a test's final drain, one message at
	// a time, stays short.
	maxAhead int
}

// publish publishes the numbered messages one at a time to the partition
// through a node, moving to the next registered node when one fails,
// until stop.
func (s orderedStream) publish(stop <-chan struct{}) {
	var pr partitionProducer
	defer pr.close()
	at := 0
	for seq := 0; !stopping(stop); seq++ {
		if pr.addr == "" {
			addrs := s.c.nodeTCPs()
			if len(addrs) == 0 {
				seq--
				if !wait(stop, 100*time.Millisecond) {
					return
				}
				continue
			}
			pr.addr = addrs[at%len(addrs)]
		}
		s.h.attempt(orderedBody(seq))
		if err := pr.publish(s.topic, s.p, orderedBody(seq)); err != nil {
			at++
			pr.close()
			pr.addr = ""
			if !wait(stop, 50*time.Millisecond) {
				return
			}
			continue
		}
		s.h.ackOrdered(seq, time.Now())
		// Paced so the one-at-a-time ordered consumer keeps up.
		if !wait(stop, 10*time.Millisecond) {
			return
		}
		for s.maxAhead > 0 && seq-s.h.orderedReached() >= s.maxAhead {
			if !wait(stop, 10*time.Millisecond) {
				return
			}
		}
	}
}

// consume follows the partition's leader with SUB_ORDERED, one message in
// flight, until stop.
func (s orderedStream) consume(stop <-chan struct{}) {
	for !stopping(stop) {
		addr, ok := s.c.leaderTCP(s.topic, s.p)
		if !ok {
			wait(stop, 100*time.Millisecond)
			continue
		}
		if err := s.consumeFrom(addr, stop); err != nil && !wait(stop, 100*time.Millisecond) {
			return
		}
	}
}

// consumeFrom consumes from one node until the connection fails, stop, or
// the leader moves elsewhere. A message's FIN is known confirmed on every
// ISR member once the next message comes on the same connection without an
// E_FIN_FAILED between: the ordered channel delivers nothing before. The
// same message again is the exception when its own FIN then fails
// (finWitness).
func (s orderedStream) consumeFrom(addr string, stop <-chan struct{}) error {
	moved := func() bool {
		now, ok := s.c.leaderTCP(s.topic, s.p)
		return ok && now != addr
	}
	w := finWitness{last: -1, repeat: -1}
	return readOrdered(addr, s.topic, s.channel, s.p, func() bool { return stopping(stop) }, moved, func(m protocol.MessageFrame, finConfirmed bool) error {
		seq, err := strconv.Atoi(strings.TrimPrefix(string(m.Body), "o-"))
		if err != nil {
			return fmt.Errorf("ordered body %q", m.Body)
		}
		w.delivered(s.h, seq, m.ID, finConfirmed, addr)
		return nil
	}, func(id uint64) { w.finFailed(s.h, id) })
}

// finWitness reads what one connection's ordered deliveries show of FINs
// confirmed. A message delivered again right after itself, with no
// E_FIN_FAILED between, seems to show its first FIN confirmed; but a
// leadership that went away and back gives the message in flight back
// and delivers it again at once, and that delivery may already be on the
// wire when the consumer's FIN arrives. The FIN then finishes the second
// delivery (same consumer, same ID), so the FIN of the second one fails:
// that failure takes the seeming confirmation back. Delivered again after
// a FIN that really was confirmed, the message is a new delivery whose
// own FIN succeeds, and the checker still finds it.
type finWitness struct {
	last     int // the number delivered before on this connection, -1 for none
	repeat   int // the history index of the last repeat of a message, -1 for none
	repeatID uint64
}

func (w *finWitness) delivered(h *history, seq int, id uint64, finConfirmed bool, from string) {
	confirms := -1
	if finConfirmed {
		confirms = w.last
	}
	i := h.deliverOrdered(seq, confirms, from)
	if seq == w.last && confirms >= 0 {
		w.repeat, w.repeatID = i, id
	}
	w.last = seq
}

func (w *finWitness) finFailed(h *history, id uint64) {
	if w.repeat >= 0 && id == w.repeatID {
		h.crossedFin(w.repeat)
		w.repeat = -1
	}
}

type orderedFrame struct {
	typ  int32
	data []byte
}

// readOrdered consumes partition p of a channel with SUB_ORDERED (go-nsq
// has no such command), one message in flight, handing got each message
// before it FINs it, until stopped, the connection fails, or idle, asked
// whenever nothing came for a while, says to go elsewhere. got learns
// whether the FIN of the message before on this connection was confirmed:
// this one came after it with no E_FIN_FAILED between. finFailed learns
// the ID of each FIN that failed.
func readOrdered(addr, topicName, channel string, p int32, stopped, idle func() bool, got func(m protocol.MessageFrame, finConfirmed bool) error, finFailed func(id uint64)) error {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	send := func(line string) error {
		conn.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, err := conn.Write([]byte(line + "\n"))
		return err
	}
	conn.Write([]byte(protocol.MagicV2))
	if err := send(fmt.Sprintf("SUB_ORDERED %s %s %d", topicName, channel, p)); err != nil {
		return err
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if typ, data, err := protocol.ReadFrame(conn); err != nil || typ != protocol.FrameTypeResponse || string(data) != "OK" {
		return fmt.Errorf("SUB_ORDERED on %s: %d %q %v", addr, typ, data, err)
	}
	if err := send("RDY 1"); err != nil {
		return err
	}
	// Frames are read apart from the wait for them: a read deadline
	// falling inside a frame would leave the stream mid-frame.
	conn.SetReadDeadline(time.Time{})
	frames := make(chan orderedFrame)
	go func() {
		defer close(frames)
		for {
			typ, data, err := protocol.ReadFrame(conn)
			if err != nil {
				return
			}
			frames <- orderedFrame{typ, data}
		}
	}()
	defer func() {
		conn.Close()
		for range frames {
		}
	}()
	finned, failed := false, false
	for !stopped() {
		var typ int32
		var data []byte
		select {
		case f, ok := <-frames:
			if !ok {
				return errors.New("the connection ended")
			}
			typ, data = f.typ, f.data
		case <-time.After(200 * time.Millisecond):
			if idle() {
				return nil
			}
			continue
		}
		switch typ {
		case protocol.FrameTypeResponse:
			if string(data) == "_heartbeat_" {
				if err := send("NOP"); err != nil {
					return err
				}
			}
		case protocol.FrameTypeError:
			// E_FIN_FAILED while a replica is unreachable: the message
			// comes again after its timeout.
			if !strings.HasPrefix(string(data), "E_FIN_FAILED") {
				return fmt.Errorf("%s", data)
			}
			failed = true
			// "E_FIN_FAILED FIN <id> failed <why>"
			if f := strings.Fields(string(data)); len(f) > 2 {
				if id, err := protocol.ParseMessageID([]byte(f[2])); err == nil {
					finFailed(id)
				}
			}
		case protocol.FrameTypeMessage:
			// SUB_ORDERED frames carry the offset and size (youzan's).
			m, err := protocol.DecodeExtendedMessage(data, false, true)
			if err != nil {
				return err
			}
			if err := got(m, finned && !failed); err != nil {
				return err
			}
			var id [16]byte
			protocol.FormatMessageID(id[:], m.ID)
			if err := send("FIN " + string(id[:])); err != nil {
				return err
			}
			finned, failed = true, false
		}
	}
	return nil
}

// partitionProducer publishes to one partition of a topic (youzan's PUB
// <topic> <partition>, which go-nsq cannot send) over one connection,
// dialled again after any failure.
type partitionProducer struct {
	addr string
	conn net.Conn
	r    *bufio.Reader
}

func (pr *partitionProducer) publish(topic string, p int32, body string) error {
	if pr.conn == nil {
		conn, err := net.DialTimeout("tcp", pr.addr, time.Second)
		if err != nil {
			return err
		}
		pr.conn, pr.r = conn, bufio.NewReader(conn)
		if _, err := conn.Write([]byte(protocol.MagicV2)); err != nil {
			pr.close()
			return err
		}
	}
	if err := pr.send(topic, p, body); err != nil {
		pr.close()
		return err
	}
	return nil
}

func (pr *partitionProducer) send(topic string, p int32, body string) error {
	pr.conn.SetDeadline(time.Now().Add(5 * time.Second))
	var cmd bytes.Buffer
	fmt.Fprintf(&cmd, "PUB %s %d\n", topic, p)
	binary.Write(&cmd, binary.BigEndian, uint32(len(body)))
	cmd.WriteString(body)
	if _, err := pr.conn.Write(cmd.Bytes()); err != nil {
		return err
	}
	for {
		typ, data, err := protocol.ReadFrame(pr.r)
		switch {
		case err != nil:
			return err
		case typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_":
			if _, err := pr.conn.Write([]byte("NOP\n")); err != nil {
				return err
			}
		case typ == protocol.FrameTypeResponse && string(data) == "OK":
			return nil
		default:
			return fmt.Errorf("PUB %s %d: %s", topic, p, data)
		}
	}
}

func (pr *partitionProducer) close() {
	if pr.conn != nil {
		pr.conn.Close()
		pr.conn, pr.r = nil, nil
	}
}
