// Package flood offers a node more pipelined PUBs than it answers, as an
// asynchronous producer does, and reports what the node answered: the
// cluster tests' overload load.
package flood

import (
	"bufio"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/protocol"
)

// Target is one partition a flood publishes to.
type Target struct {
	Topic     string
	Partition int32
}

// Result is what one or more connections of a flood saw.
type Result struct {
	Acked                       []string // the bodies acknowledged
	Refused, Failed, Unanswered int      // refused: E_PUB_TOO_MUCH_WAITING
	FirstFailure                string
	// Failures counts the failed PUBs by the error's code and their
	// partition, "E_CODE topic/partition", so a test can tell the
	// failures a fault explains from those it does not.
	Failures map[string]int `json:",omitempty"`
	Slowest  time.Duration
	// HeldBack counts the times a connection had its whole window
	// unanswered: the node was not taking PUBs as fast as they came.
	HeldBack int
}

// Add folds o into r.
func (r *Result) Add(o Result) {
	r.Acked = append(r.Acked, o.Acked...)
	r.Refused += o.Refused
	r.Failed += o.Failed
	r.Unanswered += o.Unanswered
	for k, n := range o.Failures {
		r.fail(k, n)
	}
	r.HeldBack += o.HeldBack
	if r.FirstFailure == "" {
		r.FirstFailure = o.FirstFailure
	}
	r.Slowest = max(r.Slowest, o.Slowest)
}

// Body is the body of the i-th PUB of the connection named name to t;
// bodies are unique across connections with distinct names.
func Body(name string, t Target, i int) string {
	return name + "-" + t.Topic + "-" + strconv.Itoa(int(t.Partition)) + "-" + strconv.Itoa(i)
}

func (r *Result) fail(key string, n int) {
	if r.Failures == nil {
		r.Failures = map[string]int{}
	}
	r.Failures[key] += n
}

type sent struct {
	body   string
	target Target
	at     time.Time
}

// Publish sends PUBs round robin over targets on one connection to addr
// until stop says so, keeping up to window of them unanswered, and reads
// every answer; a node answers PUBs in the order they came.
func Publish(addr string, targets []Target, name string, window int, stop func() bool) Result {
	var res Result
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		res.Failed, res.FirstFailure = 1, err.Error()
		return res
	}
	defer conn.Close()
	inFlight := make(chan sent, window)
	var heldBack int
	go func() {
		defer close(inFlight)
		heldBack = send(conn, targets, name, inFlight, stop)
	}()
	r := bufio.NewReader(conn)
	for s := range inFlight {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		typ, data, err := protocol.ReadFrame(r)
		for err == nil && typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			typ, data, err = protocol.ReadFrame(r)
		}
		if err != nil {
			res.Unanswered++
			for range inFlight {
				res.Unanswered++
			}
			if res.FirstFailure == "" {
				res.FirstFailure = err.Error()
			}
			break
		}
		res.Slowest = max(res.Slowest, time.Since(s.at))
		switch {
		case typ == protocol.FrameTypeResponse && string(data) == "OK":
			res.Acked = append(res.Acked, s.body)
		case typ == protocol.FrameTypeError && strings.HasPrefix(string(data), "E_PUB_TOO_MUCH_WAITING"):
			res.Refused++
		default:
			res.Failed++
			if res.FirstFailure == "" {
				res.FirstFailure = string(data)
			}
			code, _, _ := strings.Cut(string(data), " ")
			res.fail(code+" "+s.target.Topic+"/"+strconv.Itoa(int(s.target.Partition)), 1)
		}
	}
	res.HeldBack = heldBack // the sender is done: it closed inFlight
	return res
}

// send writes PUBs until stop says so or the connection fails, and
// returns how often the window was full.
func send(conn net.Conn, targets []Target, name string, inFlight chan<- sent, stop func() bool) (heldBack int) {
	w := bufio.NewWriterSize(conn, 64<<10)
	w.WriteString(protocol.MagicV2)
	var size [4]byte
	for i := 0; !stop(); i++ {
		t := targets[i%len(targets)]
		b := Body(name, t, i)
		w.WriteString("PUB " + t.Topic + " " + strconv.Itoa(int(t.Partition)) + "\n")
		binary.BigEndian.PutUint32(size[:], uint32(len(b)))
		w.Write(size[:])
		w.WriteString(b)
		s := sent{b, t, time.Now()}
		select {
		case inFlight <- s:
		default:
			// The window is full: what is buffered goes out, and the
			// sender waits for an answer to make room.
			heldBack++
			if w.Flush() != nil {
				return heldBack
			}
			inFlight <- s
		}
	}
	w.Flush()
	return heldBack
}
