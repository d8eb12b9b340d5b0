package protocol

import (
	"bufio"
	"io"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/rawio"
)

// outItem is something a channel actor handed the connection.
type outItem struct {
	deliveries []channel.Delivery
	errFrame   []byte
	closeConn  bool
}

// connWriter is the outgoing stream, written under the session's pen; its
// flush timer is the writer goroutine's alone.
type connWriter struct {
	s     *session
	raw   io.Writer   // the connection, or the compressor over it
	comp  FlushWriter // nil without compression
	bw    *bufio.Writer
	dirty bool
	buf   []byte
	owed  []byte // what answerNow's write left, for the writer to write first

	// flushDue fires one output buffer timeout after a message was left in
	// the buffer; flushC is nil while nothing waits.
	flushDue *time.Timer
	flushC   <-chan time.Time
}

// writeLoop owns every byte the session sends but the answers written by
// the goroutines that set them (answerNow): replies in command order,
// messages from channel actors, and heartbeats. Replies and errors are
// flushed at once; messages wait in the output buffer until the client's window is
// full or the output buffer timeout has passed since the first of them was
// buffered, as in nsqd. It holds the session's pen while it writes.
func (s *session) writeLoop() {
	defer close(s.written)
	w := s.out
	heartbeat := newTicker(s.settings.Load().heartbeat)
	defer func() { heartbeat.Stop(); w.stopFlushTimer() }()

	for {
		var ok bool
		select {
		case <-s.replies.ready:
			ok = s.penned(func() bool { return w.answer(s.replies.takeReady(), heartbeat) })
		case <-s.outNotify:
			ok = s.penned(w.drainOut)
		case <-heartbeat.C():
			ok = s.penned(func() bool {
				return w.frame(FrameTypeResponse, []byte("_heartbeat_")) == nil && w.flush() == nil
			})
		case <-w.flushC:
			w.flushC = nil
			ok = s.penned(func() bool { return !w.dirty || w.flush() == nil })
		case <-s.quit:
			return
		}
		if !ok {
			return
		}
	}
}

// penned runs the writer's f holding the pen, which every write to the
// connection holds, after what answerNow's write left unwritten.
func (s *session) penned(f func() bool) bool {
	s.pen.Lock()
	defer s.pen.Unlock()
	if w := s.out; len(w.owed) > 0 {
		if _, err := w.bw.Write(w.owed); err != nil {
			s.conn.Close()
			return false
		}
		w.owed, w.dirty = w.owed[:0], true
	}
	return f()
}

// answer writes answers, applying an IDENTIFY's settings after its OK, and
// flushes once: a record that answers several pipelined PUBs costs one
// write to the socket, not one per PUB. False ends the session.
func (w *connWriter) answer(answers []*reply, heartbeat *ticker) bool {
	s := w.s
	for _, r := range answers {
		if w.frame(r.frameType, r.data) != nil {
			s.conn.Close()
			return false
		}
		if r.special() {
			// An IDENTIFY's OK goes out before the stream upgrades.
			if w.flush() != nil || r.fatal {
				s.conn.Close()
				return false
			}
		}
		if r.identify != nil {
			if !w.apply(r) {
				return false
			}
			heartbeat.Reset(s.settings.Load().heartbeat)
		}
	}
	// Dirty also without answers: what answerNow's write left over.
	if w.dirty && w.flush() != nil {
		s.conn.Close()
		return false
	}
	return true
}

// answered records that r's frame is set, on whatever goroutine the
// partition answered on, and sends the answers that became ready.
func (s *session) answered(r *reply) {
	if s.replies.answered(r) {
		s.answerNow()
	}
}

// answerNow sends the plain answers that are ready from the goroutine that
// set them, or from the reader after its own publish's turn, without ever
// blocking it: one write that does not wait for room, when the writer is
// idle with nothing buffered and the stream is plain TCP. A publish's
// answer then wakes no other goroutine. What the socket does not take, and
// every other case, is the writer's.
func (s *session) answerNow() {
	raw, ok := s.conn.(syscall.Conn)
	if !ok || !s.pen.TryLock() {
		signal(s.replies.ready)
		return
	}
	defer s.pen.Unlock()
	w := s.out
	if w.comp != nil || w.raw != s.conn || w.bw.Buffered() > 0 || len(w.owed) > 0 {
		signal(s.replies.ready)
		return
	}
	answers, more := s.replies.takePlain()
	if more {
		signal(s.replies.ready)
	}
	if len(answers) == 0 {
		return
	}
	w.buf = w.buf[:0]
	for _, r := range answers {
		w.buf = AppendFrame(w.buf, r.frameType, r.data)
	}
	if n := rawio.TryWrite(raw, w.buf); n < len(w.buf) {
		// Never a blocking write here: the writer writes the rest.
		w.owed = append(w.owed, w.buf[n:]...)
		signal(s.replies.ready)
	}
}

// apply puts an IDENTIFY's settings into effect, upgrading the stream to
// TLS and then compression as granted, and sends the OK frame that follows
// each upgrade.
func (w *connWriter) apply(r *reply) bool {
	n := r.identify
	defer close(r.applied)
	st := &connSettings{
		heartbeat:     n.HeartbeatInterval,
		msgTimeout:    n.MsgTimeout,
		sampleRate:    n.SampleRate,
		outBufSize:    n.OutputBufferSize,
		outBufTimeout: n.OutputBufferTimeout,
		snappy:        n.Snappy,
		deflate:       n.Deflate,
	}
	both := readWriter{Reader: w.s.r, Writer: w.s.conn}
	if n.TLS {
		tc, err := w.s.upgradeTLS()
		if err != nil {
			w.s.srv.Logger.Debug("tls handshake failed", "client", w.s.conn.RemoteAddr().String(), "err", err)
			return false
		}
		w.raw, r.newReader = tc, tc
		both = readWriter{Reader: tc, Writer: tc}
		// The OK that ends the upgrade is the first frame over TLS.
		w.bw = bufio.NewWriterSize(tc, MinOutputBufferSize)
		if w.frame(FrameTypeResponse, okBytes) != nil || w.flush() != nil {
			return false
		}
	}
	switch {
	case n.Snappy:
		r.newReader, w.comp = UpgradeSnappy(both)
	case n.Deflate:
		rd, wr, err := UpgradeDeflate(both, n.DeflateLevel)
		if err != nil {
			return false
		}
		r.newReader, w.comp = rd, wr
	}
	if w.comp != nil {
		w.raw = w.comp
	}
	out := w.raw
	if out == w.s.conn {
		out = rawio.Writer(w.s.conn)
	}
	w.bw = bufio.NewWriterSize(out, int(max(st.outBufSize, 1)))
	w.s.settings.Store(st)
	if w.comp != nil {
		if w.frame(FrameTypeResponse, okBytes) != nil || w.flush() != nil {
			return false
		}
	}
	return true
}

type readWriter struct {
	io.Reader
	io.Writer
}

func (w *connWriter) frame(frameType int32, data []byte) error {
	w.buf = AppendFrame(w.buf[:0], frameType, data)
	_, err := w.bw.Write(w.buf)
	w.dirty = true
	return err
}

func (w *connWriter) flush() error {
	w.stopFlushTimer()
	// A deadline left over from before heartbeats were disabled would
	// otherwise fail the first write after it.
	var deadline time.Time
	if hb := w.s.settings.Load().heartbeat; hb > 0 {
		deadline = time.Now().Add(hb)
	}
	w.s.conn.SetWriteDeadline(deadline)
	if err := w.bw.Flush(); err != nil {
		return err
	}
	if w.comp != nil {
		if err := w.comp.Flush(); err != nil {
			return err
		}
	}
	w.dirty = false
	return nil
}

// drainOut writes what channel actors handed over; false ends the session.
func (w *connWriter) drainOut() bool {
	s := w.s
	s.outMu.Lock()
	items := s.outItems
	s.outItems = nil
	s.outMu.Unlock()
	st := s.settings.Load()
	framing := s.framing.Load()
	for _, it := range items {
		switch {
		case it.closeConn:
			w.flush()
			s.conn.Close()
			return false
		case it.errFrame != nil:
			if w.frame(FrameTypeError, it.errFrame) != nil || w.flush() != nil {
				return false
			}
		default:
			for _, d := range it.deliveries {
				if st.sampleRate > 0 && rand.Int32N(100) > st.sampleRate {
					w.sampledOut(d)
					continue
				}
				if framing == 0 {
					w.buf = AppendMessageFrame(w.buf[:0], d.Timestamp, d.Attempts, d.ID, d.Body)
				} else {
					w.buf = appendYouzanFrame(w.buf[:0], framing, &d)
				}
				if _, err := w.bw.Write(w.buf); err != nil {
					return false
				}
				w.dirty = true
				s.messageCount.Add(1)
			}
		}
	}
	if w.dirty && (s.consumer == nil || s.consumer.Full() || st.outBufTimeout <= 0) {
		return w.flush() == nil
	}
	if w.dirty && w.flushC == nil {
		w.startFlushTimer(st.outBufTimeout)
	}
	return true
}

// appendYouzanFrame lays a delivery out with the sections of youzan's frame
// the consumer asked for.
func appendYouzanFrame(dst []byte, framing uint32, d *channel.Delivery) []byte {
	m := MessageFrame{Timestamp: d.Timestamp, Attempts: d.Attempts, ID: d.ID, Body: d.Body,
		Ext: framing&frameExt != 0, Header: d.Header(),
		Detail: framing&frameDetail != 0, Offset: d.Offset, RawSize: d.Size}
	return AppendExtendedMessageFrame(dst, &m)
}

func (w *connWriter) startFlushTimer(d time.Duration) {
	if w.flushDue == nil {
		w.flushDue = time.NewTimer(d)
	} else {
		w.flushDue.Reset(d)
	}
	w.flushC = w.flushDue.C
}

func (w *connWriter) stopFlushTimer() {
	if w.flushC != nil {
		w.flushDue.Stop()
		w.flushC = nil
	}
}

// sampledOut finishes a message the client's sample rate skipped: nsqd drops
// such messages, so they must not come back after a timeout.
func (w *connWriter) sampledOut(d channel.Delivery) {
	s := w.s
	if pid := s.subscription.PID(topic.PartitionOf(d.ID)); pid != nil {
		s.srv.Broker.System().Root.Send(pid, &channel.Finished{ConsumerID: s.id, ID: d.ID})
	}
}

// ticker is a time.Ticker that may be off (interval 0).
type ticker struct{ t *time.Ticker }

func newTicker(d time.Duration) *ticker {
	if d <= 0 {
		return &ticker{}
	}
	return &ticker{t: time.NewTicker(d)}
}

func (t *ticker) C() <-chan time.Time {
	if t.t == nil {
		return nil
	}
	return t.t.C
}

func (t *ticker) Reset(d time.Duration) {
	if d <= 0 {
		t.Stop()
		t.t = nil
		return
	}
	if t.t == nil {
		t.t = time.NewTicker(d)
		return
	}
	t.t.Reset(d)
}

func (t *ticker) Stop() {
	if t.t != nil {
		t.t.Stop()
	}
}
