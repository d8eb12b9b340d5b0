package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/encoding/protowire"
)

func TestWritesAppliedInOrderAndAcked(t *testing.T) {
	for _, async := range []bool{false, true} {
		name := map[bool]string{false: "reply inline", true: "reply from other goroutines"}[async]
		t.Run(name, func(t *testing.T) {
			rec := &recorder{async: async}
			_, addr := startServer(t, rec, Options{NodeID: "follower"})
			const n = 500
			l := newLeader(n)
			s := l.open(t, dial(t, addr), Options{NodeID: "leader"})
			for i := int64(1); i <= n; i++ {
				if err := s.Send(writeFrame(i, 200)); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			var acked []int64
			for range n {
				a := l.nextAck(t)
				if a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE || a.GetTopic() != "orders" || a.GetPartition() != 1 {
					t.Fatalf("ack %v", a)
				}
				acked = append(acked, a.GetLogId())
			}
			want := make([]int64, n)
			for i := range want {
				want[i] = int64(i + 1)
			}
			if got := rec.logIDs(); !slices.Equal(got, want) {
				t.Fatalf("applied out of order: %v", got)
			}
			slices.Sort(acked)
			if !slices.Equal(acked, want) {
				t.Fatalf("acked %v", acked)
			}
		})
	}
}

func TestOffsetsAndLargeBatch(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{})
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{})
	off := &messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{Topic: "orders", Partition: 1, Channel: "billing", VOffset: 4096}}}
	if err := s.Send(off); err != nil {
		t.Fatal(err)
	}
	// A full 5 MiB MPUB plus its length prefixes and headers must fit.
	if err := s.Send(writeFrame(9, 5<<20+4*1000)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetLogId() != 9 || a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		t.Fatalf("ack %v", a)
	}
	// The offset was sent before the write, and frames are handled in order.
	if got := rec.offsetCount(); got != 1 {
		t.Fatalf("%d offset updates applied, want 1", got)
	}
}

func TestBadFramesDoNotCrashTheServer(t *testing.T) {
	rec := &recorder{}
	logs := &logRecorder{}
	_, addr := startServer(t, rec, Options{Logger: slog.New(logs)})
	valid := marshal(t, writeFrame(42, 16))
	writeWith := func(w *messages.ReplicaWrite) []byte {
		return marshal(t, &messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: w}})
	}
	rec7 := &messages.CommitRecord{LogId: 7, LastMsgLogId: 7, MsgNum: 1, MsgSize: 4}
	unknownField := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7)
	writeAsVarint := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1)

	type outcome int
	const (
		ignored outcome = iota // the next valid write is the first thing acked
		refused                // answered with a FOLLOWER ack, not applied
		ended                  // the stream is ended with an error status
	)
	cases := []struct {
		name  string
		frame []byte
		want  outcome
	}{
		{"not protobuf", []byte{0xff, 0xff, 0xff, 0xff}, ended},
		{"truncated write", valid[:len(valid)/2], ended},
		{"larger than the frame limit", nil, ended},
		{"empty frame", []byte{}, ignored},
		{"unknown field only", unknownField, ignored},
		{"write field with the wrong wire type", writeAsVarint, ignored},
		{"empty offset update", marshal(t, &messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{}}}), ignored},
		{"heartbeat", marshal(t, &messages.LeaderFrame{Body: &messages.LeaderFrame_Heartbeat{Heartbeat: &messages.Heartbeat{}}}), ignored},
		{"empty write", writeWith(&messages.ReplicaWrite{}), refused},
		{"write without record", writeWith(&messages.ReplicaWrite{Topic: "orders", Messages: []byte("abcd")}), refused},
		{"write without topic", writeWith(&messages.ReplicaWrite{Record: rec7, Messages: []byte("abcd")}), refused},
		{"write to negative partition", writeWith(&messages.ReplicaWrite{Topic: "orders", Partition: -1, Record: rec7, Messages: []byte("abcd")}), refused},
		{"write without messages", writeWith(&messages.ReplicaWrite{Topic: "orders", Record: rec7}), refused},
		{"record with zero messages", writeWith(&messages.ReplicaWrite{Topic: "orders", Record: &messages.CommitRecord{LogId: 7}, Messages: []byte("abcd")}), refused},
		{"probe of an empty log carrying a record", writeWith(&messages.ReplicaWrite{Topic: "orders", EmptyLog: true, Record: rec7, Messages: []byte("abcd")}), refused},
		{"frame of writes holding a bad write", marshal(t, writesFrame(&messages.ReplicaWrite{Topic: "orders", Record: rec7})), refused},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(rec.logIDs())
			rs := openRaw(t, addr)
			var err error
			if tc.frame == nil {
				// Only a header announcing too much: the server must not
				// wait for, or make room for, what it announces.
				_, err = rs.c.Write(binary.BigEndian.AppendUint32(nil, maxFrameSize+1))
			} else {
				err = rs.send(tc.frame)
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == ended {
				for {
					if _, err := rs.next(); err != nil {
						if ne, ok := err.(net.Error); ok && ne.Timeout() {
							t.Fatalf("server kept the connection open after a bad frame: %v", err)
						}
						return
					}
					// heartbeats sent before the bad frame arrived
				}
			}
			if err := rs.send(valid); err != nil {
				t.Fatal(err)
			}
			next := rs.acks()
			a := next()
			if tc.want == refused {
				if a.GetKind() != messages.ErrorKind_ERROR_KIND_FOLLOWER || a.GetText() == "" {
					t.Fatalf("refusal %v, want kind FOLLOWER with a reason", a)
				}
				a = next()
			}
			if a.GetLogId() != 42 || a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
				t.Fatalf("ack %v, want the valid write's", a)
			}
			if got := rec.logIDs()[before:]; !slices.Equal(got, []int64{42}) {
				t.Fatalf("applied %v, want only the valid write", got)
			}
		})
	}
	if got := rec.offsetCount(); got != 0 {
		t.Fatalf("%d invalid offset updates applied", got)
	}

	t.Run("raw TCP garbage", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n" + strings.Repeat("\x00\xff", 1000))); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		// The server may close or reset the connection; it must not hang on it.
		_, err = io.Copy(io.Discard, c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("server kept a garbage connection open: %v", err)
		}
		if !logs.warned("replication connection refused") {
			t.Fatal("no warning of the refused connection")
		}
	})

	// The server still serves a well-behaved leader.
	l := newLeader(1)
	s := l.open(t, dial(t, addr), Options{})
	if err := s.Send(writeFrame(43, 16)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetLogId() != 43 {
		t.Fatalf("ack %v", a)
	}
}

func TestServerEndsSilentLeaderStream(t *testing.T) {
	opt := Options{Heartbeat: 50 * time.Millisecond, DownAfter: 250 * time.Millisecond}
	_, addr := startServer(t, &recorder{}, opt)
	// A leader that sends the preface and then nothing: no heartbeat, no
	// write.
	rs := openRaw(t, addr)
	start := time.Now()
	beats := 0
	for {
		f, err := rs.next()
		if err == nil {
			if f.GetHeartbeat() != nil {
				beats++
			}
			continue
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("stream not ended: %v", err)
		}
		break
	}
	elapsed := time.Since(start)
	if elapsed < opt.DownAfter-opt.Heartbeat {
		t.Fatalf("ended after %v, before DownAfter %v", elapsed, opt.DownAfter)
	}
	if !raceEnabled && elapsed > opt.DownAfter+promptly() {
		t.Fatalf("ended after %v, DownAfter is %v", elapsed, opt.DownAfter)
	}
	if beats < 2 {
		t.Fatalf("got %d heartbeats from the follower in %v", beats, elapsed)
	}
}

func TestStopClosesEveryStreamAtOnce(t *testing.T) {
	srv, addr := startServer(t, &recorder{}, Options{})
	conn := dial(t, addr)
	leaders := make([]*leader, 3)
	for i := range leaders {
		leaders[i] = newLeader(1)
		s := leaders[i].open(t, conn, Options{})
		// An acked write proves the stream reached the server's handler.
		if err := s.Send(writeFrame(int64(i+1), 8)); err != nil {
			t.Fatal(err)
		}
		leaders[i].nextAck(t)
	}
	start := time.Now()
	srv.Stop()
	for i, l := range leaders {
		err := l.waitDown(t, promptly())
		if errors.Is(err, ErrSilent) {
			t.Fatalf("stream %d: %v; Stop should break it, not go silent", i, err)
		}
	}
	t.Logf("all streams down %v after Stop", time.Since(start))
	for i, l := range leaders {
		if len(l.down) != 0 {
			t.Fatalf("stream %d: onDown called twice", i)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
		ok   bool
	}{
		{"defaults", Options{}, true},
		{"heartbeat only", Options{Heartbeat: 100 * time.Millisecond}, true},
		{"negative heartbeat", Options{Heartbeat: -time.Second}, false},
		{"negative down-after", Options{DownAfter: -time.Second}, false},
		{"down-after equal to heartbeat", Options{Heartbeat: time.Second, DownAfter: time.Second}, false},
		{"down-after below heartbeat", Options{Heartbeat: time.Second, DownAfter: 500 * time.Millisecond}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := tc.opt.withDefaults()
			if (err == nil) != tc.ok {
				t.Fatalf("withDefaults(%+v) error %v, want ok=%v", tc.opt, err, tc.ok)
			}
			if tc.ok && (opt.DownAfter >= time.Second || opt.DownAfter <= opt.Heartbeat) {
				t.Fatalf("defaults give heartbeat %v, down-after %v", opt.Heartbeat, opt.DownAfter)
			}
			if tc.ok {
				return
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if err := NewServer(&recorder{}, tc.opt).Serve(ln); err == nil {
				t.Fatal("Serve accepted invalid options")
			}
			if _, err := Open(context.Background(), dial(t, ln.Addr().String()), tc.opt, func(*messages.FollowerFrame, bool) {}, func(error) {}); err == nil {
				t.Fatal("Open accepted invalid options")
			}
		})
	}
	t.Run("no applier", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if err := NewServer(nil, Options{}).Serve(ln); err == nil {
			t.Fatal("Serve without an applier")
		}
	})
	t.Run("no listener", func(t *testing.T) {
		if err := NewServer(&recorder{}, Options{}).Serve(nil); err == nil {
			t.Fatal("Serve(nil)")
		}
	})
	t.Run("no address", func(t *testing.T) {
		if _, err := Dial(""); err == nil {
			t.Fatal(`Dial("")`)
		}
	})
}

// An offset update with a sync ID is acknowledged on the stream; one
// without is not.
func TestOffsetSyncAcknowledged(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{})
	l := newLeader(2)
	s := l.open(t, dial(t, addr), Options{})
	for _, id := range []int64{0, 42} {
		f := &messages.LeaderFrame{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{Topic: "orders", Partition: 0, Channel: "c", VOffset: 10, SyncId: id}}}
		if err := s.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Send(writeFrame(7, 10)); err != nil {
		t.Fatal(err)
	}
	if a := l.nextAck(t); a.GetOffsetSyncId() != 42 || a.GetChannel() != "c" {
		t.Fatalf("first ack %v, want the sync of offset 42", a)
	}
	if a := l.nextAck(t); a.GetLogId() != 7 || a.GetOffsetSyncId() != 0 {
		t.Fatalf("second ack %v, want the write's", a)
	}
}

// A batch's writes are applied and acked in order, one ack each, with a bad
// write refused on its own; a batch nested in a batch is ignored.
func TestBatchedFramesAppliedInOrder(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{})
	rs := openRaw(t, addr)
	bad := &messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: &messages.ReplicaWrite{Topic: "orders"}}}
	batch := leaderBatch([]*messages.LeaderFrame{
		writeFrame(1, 8), writeFrame(2, 8), bad,
		leaderBatch([]*messages.LeaderFrame{writeFrame(99, 8)}),
		writeFrame(3, 8),
	})
	if err := rs.send(marshal(t, batch)); err != nil {
		t.Fatal(err)
	}
	next := rs.acks()
	for _, want := range []struct {
		logID int64
		kind  messages.ErrorKind
	}{{1, messages.ErrorKind_ERROR_KIND_NONE}, {2, messages.ErrorKind_ERROR_KIND_NONE}, {0, messages.ErrorKind_ERROR_KIND_FOLLOWER}, {3, messages.ErrorKind_ERROR_KIND_NONE}} {
		if a := next(); a.GetLogId() != want.logID || a.GetKind() != want.kind {
			t.Fatalf("ack %v, want log ID %d kind %v", a, want.logID, want.kind)
		}
	}
	if got := rec.logIDs(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("applied %v, want [1 2 3]", got)
	}
}

// bigAcker answers every write with a 64 KiB ack, so a leader that does
// not read fills the socket buffers between them within a few hundred
// writes.
type bigAcker struct{}

func (bigAcker) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	reply(&messages.ReplicaAck{LogId: w.GetRecord().GetLogId(), Text: strings.Repeat("x", 64<<10)})
}
func (bigAcker) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	reply([]*messages.ReplicaAck{{LogId: ws[len(ws)-1].GetRecord().GetLogId(), Text: strings.Repeat("x", 64<<10)}})
}
func (bigAcker) ApplyOffset(*messages.ChannelOffsetUpdate, func(*messages.ReplicaAck)) {}

// A leader that stops reading and falls silent (paused, or its host gone)
// leaves the follower's sender blocked in a socket write; the silence must
// still end the stream and free the connection.
func TestServerDropsALeaderThatStopsReading(t *testing.T) {
	opt := Options{Heartbeat: 50 * time.Millisecond, DownAfter: 250 * time.Millisecond}
	srv, addr := startServer(t, bigAcker{}, opt)
	rs := openRaw(t, addr)
	for i := range int64(400) {
		if err := rs.send(marshal(t, writeFrame(i+1, 8))); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the follower closed the silent leader's connection", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns) == 0
	})
}

// A frame of several writes is applied as one and answered with one ack
// for its last write; a frame whose writes are not of one partition is
// refused whole; and a frame cut off midway by the connection is applied
// not at all, while the frame before it stays applied and acknowledged.
func TestWritesFrameAppliedWholeOrNotAtAll(t *testing.T) {
	rec := &recorder{}
	_, addr := startServer(t, rec, Options{})
	rs := openRaw(t, addr)
	next := rs.acks()
	write := func(partition int32, logID int64) *messages.ReplicaWrite {
		w := writeFrame(logID, 16).GetWrite()
		w.Partition = partition
		return w
	}
	if err := rs.send(marshal(t, writesFrame(write(1, 1), write(1, 2)))); err != nil {
		t.Fatal(err)
	}
	if a := next(); a.GetLogId() != 2 || a.GetKind() != messages.ErrorKind_ERROR_KIND_NONE {
		t.Fatalf("ack %v, want one for write 2 covering write 1", a)
	}
	if err := rs.send(marshal(t, writesFrame(write(1, 3), write(2, 4)))); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{3, 4} {
		if a := next(); a.GetLogId() != id || a.GetKind() != messages.ErrorKind_ERROR_KIND_FOLLOWER {
			t.Fatalf("answer %v, want write %d refused: the frame mixes partitions", a, id)
		}
	}
	cut := marshal(t, writesFrame(write(1, 3), write(1, 4)))
	frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(cut))), cut...)
	if _, err := rs.c.Write(frame[:len(frame)-10]); err != nil {
		t.Fatal(err)
	}
	if err := rs.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := rs.next(); err != nil {
			break // the server ended the session it could not read
		}
	}
	if got := rec.logIDs(); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("applied %v, want only the whole frame's writes 1 and 2", got)
	}
}

// hereRecorder is a recorder that also applies frames on the reader's
// goroutine, and notes which way each frame came.
type hereRecorder struct {
	recorder
	mu   sync.Mutex
	here []bool // per frame of writes: applied through ApplyWritesHere
}

func (h *hereRecorder) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	h.note(false)
	h.recorder.ApplyWrites(ws, reply)
}

func (h *hereRecorder) ApplyWritesHere(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	h.note(true)
	h.recorder.ApplyWrites(ws, reply)
}

func (h *hereRecorder) note(here bool) {
	h.mu.Lock()
	h.here = append(h.here, here)
	h.mu.Unlock()
}

func (h *hereRecorder) ways() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.here)
}

// A frame the reader has nothing after is applied on the reader's
// goroutine (ApplyWritesHere), its ack written from there; frames with more
// behind them in the socket go the usual way, so one partition's append
// never holds up the next partition's frame. Acks come back in order
// either way, between heartbeats the sender writes.
func TestFrameAppliedOnTheReaderWhenNothingFollows(t *testing.T) {
	rec := &hereRecorder{}
	// The raw stream sends no heartbeats: with DownAfter left at three
	// heartbeats (15 ms), a test goroutine held up that long between two
	// frames, as under -race beside the cluster tests, counted as a
	// silent leader and ended the stream.
	_, addr := startServer(t, rec, Options{Heartbeat: 5 * time.Millisecond, DownAfter: time.Minute})
	rs := openRaw(t, addr)
	next := rs.acks()
	if err := rs.send(marshal(t, writesFrame(writeFrame(1, 16).GetWrite()))); err != nil {
		t.Fatal(err)
	}
	if a := next(); a.GetLogId() != 1 {
		t.Fatalf("ack %v, want log ID 1", a)
	}
	if got := rec.ways(); !slices.Equal(got, []bool{true}) {
		t.Fatalf("a lone frame was applied here: %v, want [true]", got)
	}
	// Three frames in one write: the first two have more behind them.
	var three []byte
	for id := int64(2); id <= 4; id++ {
		body := marshal(t, writesFrame(writeFrame(id, 16).GetWrite()))
		three = append(binary.BigEndian.AppendUint32(three, uint32(len(body))), body...)
	}
	if _, err := rs.c.Write(three); err != nil {
		t.Fatal(err)
	}
	for id := int64(2); id <= 4; id++ {
		if a := next(); a.GetLogId() != id {
			t.Fatalf("ack %v, want log ID %d", a, id)
		}
	}
	if got := rec.ways(); !slices.Equal(got, []bool{true, false, false, true}) {
		t.Fatalf("frames applied here: %v, want [true false false true]", got)
	}
	// Many lone frames while heartbeats go out: every ack arrives once.
	for id := int64(5); id <= 200; id++ {
		if err := rs.send(marshal(t, writesFrame(writeFrame(id, 16).GetWrite()))); err != nil {
			t.Fatal(err)
		}
		if a := next(); a.GetLogId() != id {
			t.Fatalf("ack %v, want log ID %d", a, id)
		}
	}
}
