package protocol_test

// nsqd's behaviours that depend on time: heartbeats, client and message
// timeouts, deferred delivery, output buffering. Lower bounds are asserted
// exactly (a loaded machine only makes things later); upper bounds are
// left to the frame read deadline.

import (
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partitamq/partita/protocol"
)

func TestClientTimeout(t *testing.T) {
	n := startNode(t, "--client-timeout", "150ms")
	c := consumer(t, n, "timeout", "ch", 0)
	// The client never answers a heartbeat, so the server gives up on it.
	c.closedByServer()
}

func TestClientHeartbeat(t *testing.T) {
	n := startNode(t, "--client-timeout", "600ms")
	c := consumer(t, n, "heartbeat", "ch", 0)
	// Answering each heartbeat with NOP keeps the connection alive for
	// several client timeouts.
	start, beats := time.Now(), 0
	for time.Since(start) < 2*time.Second {
		ft, data, err := c.tryFrame(frameWait)
		if err != nil || !isHeartbeat(ft, data) {
			t.Fatalf("got type %d %q, %v; want a heartbeat", ft, data, err)
		}
		c.send("NOP", nil)
		beats++
	}
	if beats < 3 {
		t.Fatalf("%d heartbeats in %v, want one every 300ms", beats, time.Since(start))
	}
	c.pub("heartbeat", []byte("alive"))
}

func TestClientHeartbeatDisable(t *testing.T) {
	n := startNode(t, "--client-timeout", "100ms")
	c := dial(t, n)
	c.identify(map[string]any{"heartbeat_interval": -1})
	// Idle for five client timeouts: no heartbeat, no close.
	c.nothingFor(500 * time.Millisecond)
	c.pub("noheartbeat", []byte("alive"))
}

func TestDPUB(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "dpub", "ch", 0)
	c.send("DPUB dpub 60000", []byte("deferred"))
	c.response(protocol.ResponseOK)
	waitStats(t, n, "dpub", "ch", "a deferred message", func(s chanStats) bool {
		return s.Deferred == 1 && s.Messages == 1
	})

	c.send("DPUB dpub 3600100", []byte("too late"))
	c.fatal("E_INVALID DPUB timeout 3600100 out of range 0-3600000")
}

func TestDPUBDeliversAfterDelay(t *testing.T) {
	n := startNode(t)
	c := consumer(t, n, "dpubdelay", "ch", 1)
	start := time.Now()
	c.send("DPUB dpubdelay 500", []byte("later"))
	c.response(protocol.ResponseOK)
	m := c.message()
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("deferred message arrived after %v, want at least 500ms", d)
	}
	if string(m.Body) != "later" || m.Attempts != 1 {
		t.Fatalf("got %q attempts %d", m.Body, m.Attempts)
	}
}

func TestReqDelayRedelivers(t *testing.T) {
	n := startNode(t)
	publish(t, n, "reqdelay", "again")
	c := consumer(t, n, "reqdelay", "ch", 1)
	m := c.message()
	start := time.Now()
	c.send("REQ "+idText(m.ID)+" 500", nil)
	again := c.message()
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("requeued message arrived after %v, want at least 500ms", d)
	}
	if again.ID != m.ID || again.Attempts != 2 || string(again.Body) != "again" {
		t.Fatalf("got %x attempts %d %q, want %x attempts 2", again.ID, again.Attempts, again.Body, m.ID)
	}
	s := waitStats(t, n, "reqdelay", "ch", "in flight again", func(s chanStats) bool { return s.InFlight == 1 })
	if s.Requeues != 1 {
		t.Fatalf("requeue_count = %d, want 1", s.Requeues)
	}
}

func TestReqTimeoutRange(t *testing.T) {
	n := startNode(t, "--max-req-timeout", "1s")
	publish(t, n, "reqrange", "m")
	c := consumer(t, n, "reqrange", "ch", 1)
	m := c.message()

	// REQ 0 puts it straight back.
	c.send("REQ "+idText(m.ID)+" 0", nil)
	if again := c.message(); again.ID != m.ID || again.Attempts != 2 {
		t.Fatalf("got %x attempts %d, want %x attempts 2", again.ID, again.Attempts, m.ID)
	}

	// A delay beyond --max-req-timeout is clamped to it, not refused: the
	// message is back after 1s, not after a minute.
	start := time.Now()
	c.send("REQ "+idText(m.ID)+" 60000", nil)
	again := c.message()
	if d := time.Since(start); d < time.Second {
		t.Fatalf("clamped REQ redelivered after %v, want at least 1s", d)
	}
	if again.ID != m.ID || again.Attempts != 3 {
		t.Fatalf("got %x attempts %d, want %x attempts 3", again.ID, again.Attempts, m.ID)
	}
}

func TestTouch(t *testing.T) {
	n := startNode(t, "--msg-timeout", "1s")
	publish(t, n, "touch", "m")
	c := consumer(t, n, "touch", "ch", 1)
	m := c.message()
	// Four TOUCHes 400ms apart keep it ours well past its 1s timeout; a
	// timeout would send it to us again at once.
	for range 4 {
		c.nothingFor(400 * time.Millisecond)
		c.send("TOUCH "+idText(m.ID), nil)
	}
	c.nothingFor(400 * time.Millisecond)
	c.send("FIN "+idText(m.ID), nil)
	s := waitStats(t, n, "touch", "ch", "FIN", func(s chanStats) bool { return s.InFlight == 0 })
	if s.Timeouts != 0 {
		t.Fatalf("timeout_count = %d, want 0", s.Timeouts)
	}
}

func TestClientMsgTimeout(t *testing.T) {
	n := startNode(t)
	publish(t, n, "msgtimeout", "m")
	c := dial(t, n)
	if r := c.negotiate(map[string]any{"msg_timeout": 1000}); r.MsgTimeout != 1000 {
		t.Fatalf("IDENTIFY msg_timeout = %d, want 1000", r.MsgTimeout)
	}
	c.sub("msgtimeout", "ch")
	start := time.Now() // before the message can be delivered: its timeout counts from there
	c.rdy(1)
	m := c.message()
	c.rdy(0) // so the timed-out message is not sent straight back

	s := waitStats(t, n, "msgtimeout", "ch", "a timeout", func(s chanStats) bool { return s.Timeouts == 1 })
	if d := time.Since(start); d < time.Second {
		t.Fatalf("timed out after %v, want at least 1s", d)
	}
	if s.Requeues != 0 || s.InFlight != 0 || s.Depth != 1 {
		t.Fatalf("after the timeout requeue_count %d in_flight %d depth %d, want 0 0 1", s.Requeues, s.InFlight, s.Depth)
	}
	c.send("FIN "+idText(m.ID), nil)
	c.errorFrame("E_FIN_FAILED FIN " + idText(m.ID) + " failed ID not in flight")
	c.pub("msgtimeout", []byte("still connected"))
}

func TestInFlightWorker(t *testing.T) {
	n := startNode(t, "--msg-timeout", "500ms")
	const count = 10
	var bodies []string
	for i := range count {
		bodies = append(bodies, fmt.Sprint(i))
	}
	publish(t, n, "inflight", bodies...)
	c := consumer(t, n, "inflight", "ch", count)
	first := map[uint64]bool{}
	for range count {
		first[c.message().ID] = true
	}
	// Nobody answers: every message times out and comes back.
	for range count {
		m := c.message()
		if !first[m.ID] || m.Attempts != 2 {
			t.Fatalf("got %x attempts %d, want a timed-out message on attempt 2", m.ID, m.Attempts)
		}
		c.send("FIN "+idText(m.ID), nil)
	}
	s := waitStats(t, n, "inflight", "ch", "all FINished", func(s chanStats) bool { return s.InFlight == 0 })
	if s.Timeouts != count || s.Depth != 0 {
		t.Fatalf("timeout_count %d depth %d, want %d and 0", s.Timeouts, s.Depth, count)
	}
}

func TestOutputBuffering(t *testing.T) {
	n := startNode(t, "--max-output-buffer-size", "524288", "--max-output-buffer-timeout", "1s")
	c := dial(t, n)
	r := c.negotiate(map[string]any{"output_buffer_size": 256 * 1024, "output_buffer_timeout": 500})
	if r.OutputBufferSize != 256*1024 || r.OutputBufferTimeout != 500 {
		t.Fatalf("IDENTIFY echoed size %d timeout %d", r.OutputBufferSize, r.OutputBufferTimeout)
	}
	c.sub("buffered", "ch")
	c.rdy(10) // one message does not fill the window, so nothing forces a flush

	start := time.Now()
	publish(t, n, "buffered", "held")
	m := c.message()
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("message arrived after %v, want it held for the 500ms output buffer timeout", d)
	}
	if string(m.Body) != "held" {
		t.Fatalf("got %q", m.Body)
	}
}

func TestSampling(t *testing.T) {
	const num, rate, slack = 10000, 42, 5
	n := startNode(t, "--max-rdy-count", fmt.Sprint(num))
	c := dial(t, n)
	if r := c.negotiate(map[string]any{"sample_rate": rate}); r.SampleRate != rate {
		t.Fatalf("IDENTIFY sample_rate = %d, want %d", r.SampleRate, rate)
	}
	c.sub("sampled", "ch")

	p := dial(t, n)
	for i := 0; i < num; i += 1000 {
		batch := make([][]byte, 1000)
		for j := range batch {
			batch[j] = fmt.Appendf(nil, "%d", i+j)
		}
		p.send("MPUB sampled", mpubBody(batch...))
		p.response(protocol.ResponseOK)
	}
	c.rdy(num)

	var got atomic.Int64
	readErr := make(chan error, 1)
	go func() {
		for {
			c.conn.SetReadDeadline(time.Now().Add(time.Minute))
			ft, _, err := protocol.ReadFrame(c.r)
			if err != nil {
				readErr <- err
				return
			}
			if ft == protocol.FrameTypeMessage {
				got.Add(1)
			}
		}
	}()
	// Done when the channel has nothing left to send and what is in flight
	// is what arrived: skipped messages are dropped, not left in flight.
	waitStats(t, n, "sampled", "ch", "every message sent or skipped", func(s chanStats) bool {
		return s.Depth == 0 && s.InFlight == got.Load()
	})
	c.conn.Close()
	if err := <-readErr; !isClosed(err) && !errors.Is(err, net.ErrClosed) {
		t.Errorf("reading messages: %v", err)
	}
	t.Logf("%d of %d delivered", got.Load(), num)
	lo, hi := int64(num*(rate-slack)/100), int64(num*(rate+slack)/100)
	if g := got.Load(); g < lo || g > hi {
		t.Fatalf("%d of %d messages delivered at sample rate %d, want %d..%d", g, num, rate, lo, hi)
	}
}
