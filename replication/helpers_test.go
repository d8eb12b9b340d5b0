package replication

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/proto"
)

// childEnv makes the test binary run a replication server instead of the
// tests, so a test can SIGSTOP a real follower process.
const childEnv = "PARTITA_REPLICATION_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(serveChild())
	}
	os.Exit(m.Run())
}

func serveChild() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The parent holds stdin open; if it dies, the follower must not linger.
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	fmt.Println(ln.Addr().String())
	if err := NewServer(&recorder{}, Options{NodeID: "child"}).Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// recorder is an Applier that keeps what it was given and acks every
// write, from another goroutine when async is set.
type recorder struct {
	async   bool
	mu      sync.Mutex
	writes  []*messages.ReplicaWrite
	offsets []*messages.ChannelOffsetUpdate
}

func (r *recorder) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	r.mu.Lock()
	r.writes = append(r.writes, w)
	r.mu.Unlock()
	ack := &messages.ReplicaAck{Topic: w.GetTopic(), Partition: w.GetPartition(), LogId: w.GetRecord().GetLogId()}
	if r.async {
		go reply(ack)
		return
	}
	reply(ack)
}

// ApplyWrites keeps the frame's writes and answers with one ack covering
// them all.
func (r *recorder) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	r.mu.Lock()
	r.writes = append(r.writes, ws...)
	r.mu.Unlock()
	last := ws[len(ws)-1]
	acks := []*messages.ReplicaAck{{Topic: last.GetTopic(), Partition: last.GetPartition(), LogId: last.GetRecord().GetLogId()}}
	if r.async {
		go reply(acks)
		return
	}
	reply(acks)
}

func (r *recorder) ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck)) {
	r.mu.Lock()
	r.offsets = append(r.offsets, u)
	r.mu.Unlock()
	if reply != nil {
		reply(&messages.ReplicaAck{Topic: u.GetTopic(), Partition: u.GetPartition(), Channel: u.GetChannel(), OffsetSyncId: u.GetSyncId()})
	}
}

func (r *recorder) logIDs() []int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]int64, len(r.writes))
	for i, w := range r.writes {
		ids[i] = w.GetRecord().GetLogId()
	}
	return ids
}

func (r *recorder) offsetCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.offsets)
}

// startServer serves a on a fresh port until the test ends.
func startServer(t testing.TB, a Applier, opt Options) (*Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A test that does not ask for the silence rule gets none to speak
	// of: its leader goroutines, under -race beside the cluster tests,
	// can stay off the cores past three heartbeats, which would end the
	// stream as a silent leader's (a fresh-clone CI saw it twice). Those
	// testing the rule set DownAfter.
	if opt.DownAfter == 0 {
		opt.DownAfter = time.Minute
	}
	s := NewServer(a, opt)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// freedAddr is a loopback address nothing listens on: connections to it
// are refused.
func freedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func dial(t testing.TB, addr string) *Conn {
	t.Helper()
	conn, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// leader collects what a Stream hands to its callbacks.
type leader struct {
	acks chan *messages.ReplicaAck
	down chan error
}

func newLeader(acks int) *leader {
	return &leader{acks: make(chan *messages.ReplicaAck, acks), down: make(chan error, 2)}
}

func (l *leader) onFrame(f *messages.FollowerFrame, _ bool) { l.acks <- f.GetAck() }
func (l *leader) onDown(err error)                          { l.down <- err }

func (l *leader) open(t testing.TB, conn *Conn, opt Options) *Stream {
	t.Helper()
	s, err := Open(context.Background(), conn, opt, l.onFrame, l.onDown)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func (l *leader) nextAck(t testing.TB) *messages.ReplicaAck {
	t.Helper()
	select {
	case a := <-l.acks:
		return a
	case err := <-l.down:
		t.Fatalf("stream down while waiting for an ack: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no ack within 10s")
	}
	return nil
}

func (l *leader) waitDown(t testing.TB, within time.Duration) error {
	t.Helper()
	select {
	case err := <-l.down:
		return err
	case <-time.After(within):
		t.Fatalf("stream not reported down within %v", within)
	}
	return nil
}

func writeFrame(logID int64, size int) *messages.LeaderFrame {
	return &messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: &messages.ReplicaWrite{
		Topic:         "orders",
		Partition:     1,
		EpochForWrite: 1,
		Record:        &messages.CommitRecord{LogId: logID, LastMsgLogId: logID, Epoch: 1, MsgSize: int32(size), MsgNum: 1},
		Messages:      make([]byte, size),
	}}}
}

func writesFrame(ws ...*messages.ReplicaWrite) *messages.LeaderFrame {
	return &messages.LeaderFrame{Body: &messages.LeaderFrame_Writes{Writes: &messages.ReplicaWrites{Writes: ws}}}
}

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		<-tick.C
	}
}

// promptly bounds what should take a few milliseconds; the race detector
// slows the network code several times over on two cores.
func promptly() time.Duration {
	if raceEnabled {
		return 3 * time.Second
	}
	return 500 * time.Millisecond
}

// rawStream is a leader that puts arbitrary bytes on the wire.
type rawStream struct {
	t testing.TB
	c net.Conn
	r *frameReader
}

// openRaw connects to addr and sends the preface, as Open does.
func openRaw(t testing.TB, addr string) *rawStream {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, preface); err != nil {
		t.Fatal(err)
	}
	return &rawStream{t: t, c: c, r: newFrameReader(c)}
}

// send writes body as one frame; a peer that already closed the
// connection may make it fail, which the caller may expect.
func (rs *rawStream) send(body []byte) error {
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	_, err := rs.c.Write(append(frame, body...))
	return err
}

// next reads the follower's next frame.
func (rs *rawStream) next() (*messages.FollowerFrame, error) {
	f := new(messages.FollowerFrame)
	return f, rs.r.read(f)
}

// acks reads acks off the stream, one per call, unpacking batches.
func (rs *rawStream) acks() func() *messages.ReplicaAck {
	var queued []*messages.ReplicaAck
	return func() *messages.ReplicaAck {
		rs.t.Helper()
		for len(queued) == 0 {
			f, err := rs.next()
			if err != nil {
				rs.t.Fatalf("stream ended while waiting for an ack: %v", err)
			}
			for _, inner := range append([]*messages.FollowerFrame{f}, f.GetBatch().GetFrames()...) {
				if a := inner.GetAck(); a != nil {
					queued = append(queued, a)
				}
				queued = append(queued, inner.GetAcks().GetAcks()...)
			}
		}
		a := queued[0]
		queued = queued[1:]
		return a
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func leaderBatch(frames []*messages.LeaderFrame) *messages.LeaderFrame {
	return &messages.LeaderFrame{Body: &messages.LeaderFrame_Batch{Batch: &messages.LeaderBatch{Frames: frames}}}
}

// logRecorder is a slog handler that keeps the messages of records at or
// above Warn.
type logRecorder struct {
	mu    sync.Mutex
	warns []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		l.mu.Lock()
		l.warns = append(l.warns, r.Message)
		l.mu.Unlock()
	}
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

func (l *logRecorder) warned(substr string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.warns {
		if strings.Contains(m, substr) {
			return true
		}
	}
	return false
}
