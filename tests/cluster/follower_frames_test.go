package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/replication"
	"github.com/partitamq/partita/storage"
)

// These tests play a partition leader: they open a replication stream of
// their own to one follower of a real cluster and check how the follower
// answers writes crafted to fail one of its checks.

// ackTimeout bounds the wait for one ack; generous for -race on 2 cores.
const ackTimeout = 15 * time.Second

// fakeLeader is a replication stream to one follower, with its acks.
type fakeLeader struct {
	stream *replication.Stream
	acks   chan *messages.ReplicaAck
	down   chan error
}

func dialFollower(t *testing.T, c *testCluster, node string) *fakeLeader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := cluster.Nodes(ctx, c.cli, "/partita/")
	if err != nil {
		t.Fatal(err)
	}
	addr := ""
	for _, n := range nodes {
		if n.ID == node {
			addr = n.ClusterAddress
		}
	}
	if addr == "" {
		t.Fatalf("node %s is not registered: %+v", node, nodes)
	}
	conn, err := replication.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	l := &fakeLeader{acks: make(chan *messages.ReplicaAck, 16), down: make(chan error, 1)}
	// Under -race the nodes share two cores; a long DownAfter keeps a slow
	// heartbeat from taking the stream down mid-test.
	opt := replication.Options{NodeID: "fake-leader", DownAfter: 10 * time.Second}
	l.stream, err = replication.Open(context.Background(), conn, opt,
		func(f *messages.FollowerFrame, _ bool) { l.acks <- f.GetAck() },
		func(err error) { l.down <- err })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.stream.Close)
	return l
}

// write sends w and returns the follower's ack for it.
func (l *fakeLeader) write(t *testing.T, w *messages.ReplicaWrite) *messages.ReplicaAck {
	t.Helper()
	if err := l.stream.Send(&messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: w}}); err != nil {
		t.Fatalf("send write %d: %v", w.GetRecord().GetLogId(), err)
	}
	select {
	case a := <-l.acks:
		if a.GetLogId() != w.GetRecord().GetLogId() {
			t.Fatalf("ack for log ID %d, sent %d", a.GetLogId(), w.GetRecord().GetLogId())
		}
		return a
	case err := <-l.down:
		t.Fatalf("stream down before the ack of %d: %v", w.GetRecord().GetLogId(), err)
	case <-time.After(ackTimeout):
		t.Fatalf("no ack for log ID %d within %v", w.GetRecord().GetLogId(), ackTimeout)
	}
	return nil
}

// followerFixture is a 3-replica topic with a few writes on every replica,
// and a fake leader's stream to one follower.
type followerFixture struct {
	c        *testCluster
	topic    string
	st       cluster.PartitionState
	follower string
	leader   *fakeLeader
}

func newFollowerFixture(t *testing.T, topic string) *followerFixture {
	t.Helper()
	c := startCluster(t, 3)
	st := c.createTopic(topic, 3)
	if len(st.ISR) != 3 {
		t.Fatalf("ISR %v", st.ISR)
	}
	p := producer(t, c.nodes[st.Leader].TCP)
	// Single and multi-message records; the last is a multi-message one.
	for i := 0; i < 3; i++ {
		if err := p.Publish(topic, []byte(fmt.Sprint("single-", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.MultiPublish(topic, [][]byte{[]byte("m-a"), []byte("m-bb"), []byte("m-ccc")}); err != nil {
		t.Fatal(err)
	}
	f := &followerFixture{c: c, topic: topic, st: st, follower: c.followers(st)[0]}
	// Followers commit before they acknowledge, so the writes are on disk.
	if got := len(f.records(t)); got != 4 {
		t.Fatalf("follower %s has %d commit records, want 4", f.follower, got)
	}
	f.leader = dialFollower(t, c, f.follower)
	return f
}

func (f *followerFixture) commitLog(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(f.c.commitLog(f.follower, f.topic))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f *followerFixture) records(t *testing.T) []storage.CommitRecord {
	t.Helper()
	b := f.commitLog(t)
	if len(b)%storage.CommitRecordSize != 0 {
		t.Fatalf("commit log of %d bytes is not whole records", len(b))
	}
	var out []storage.CommitRecord
	for ; len(b) > 0; b = b[storage.CommitRecordSize:] {
		out = append(out, storage.UnmarshalCommitRecord(b))
	}
	return out
}

// segment is the follower's only data file: a few writes stay far below the
// segment size, so virtual offsets are file offsets.
func (f *followerFixture) segment(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.c.nodes[f.follower].DataPath, "topics", f.topic, "0", "00000000000000000000.log"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// data is the message bytes r covers, as the leader would resend them.
func (f *followerFixture) data(t *testing.T, r storage.CommitRecord) []byte {
	t.Helper()
	seg := f.segment(t)
	if r.End() > int64(len(seg)) {
		t.Fatalf("record ends at %d, segment holds %d bytes", r.End(), len(seg))
	}
	return bytes.Clone(seg[r.MsgOffset:r.End()])
}

// replicaWrite is r as a leader sends it: after the follower's record that
// ends where r starts.
func (f *followerFixture) replicaWrite(t *testing.T, epoch int64, r storage.CommitRecord, data []byte) *messages.ReplicaWrite {
	t.Helper()
	w := &messages.ReplicaWrite{
		Topic: f.topic, Partition: 0, EpochForWrite: epoch,
		Record: &messages.CommitRecord{LogId: r.LogID, Epoch: r.Epoch, LastMsgLogId: r.LastMsgLogID, MsgOffset: r.MsgOffset,
			MsgSize: r.MsgSize, MsgCnt: r.MsgCnt, MsgNum: r.MsgNum},
		Messages: data,
	}
	for _, p := range f.records(t) {
		if p.End() == r.MsgOffset {
			w.Prev = &messages.RecordRef{LogId: p.LogID, Epoch: p.Epoch}
		}
	}
	return w
}

// next is a record for the position after the follower's last record, with
// the given message IDs encoded as its payload; firstID, lastID and num go
// into the record as given, so they may disagree with the payload.
func (f *followerFixture) next(t *testing.T, ids []uint64, firstID, lastID int64, num int32) (storage.CommitRecord, []byte) {
	t.Helper()
	recs := f.records(t)
	last := recs[len(recs)-1]
	var data []byte
	for _, id := range ids {
		data = storage.AppendMessage(data, &storage.Message{ID: id, Timestamp: time.Now().UnixNano(), Body: []byte(fmt.Sprint("crafted-", id))})
	}
	return storage.CommitRecord{
		LogID: firstID, Epoch: last.Epoch, LastMsgLogID: lastID, MsgOffset: last.End(),
		MsgSize: int32(len(data)), MsgCnt: last.LastCount() + 1, MsgNum: num,
	}, data
}

// unchanged fails unless the follower's commit log and data file are what
// they were before.
func (f *followerFixture) unchanged(t *testing.T, commits, seg []byte) {
	t.Helper()
	if got := f.commitLog(t); !bytes.Equal(got, commits) {
		t.Fatalf("follower commit log changed: %d bytes, was %d", len(got), len(commits))
	}
	if got := f.segment(t); !bytes.Equal(got, seg) {
		t.Fatalf("follower data file changed: %d bytes, was %d", len(got), len(seg))
	}
}

func checkAck(t *testing.T, a *messages.ReplicaAck, topic string, kind messages.ErrorKind, code, text string) {
	t.Helper()
	if a.GetTopic() != topic || a.GetPartition() != 0 || a.GetKind() != kind || a.GetCode() != code || a.GetText() != text {
		t.Fatalf("ack %s/%d kind %v code %q text %q; want %s/0 kind %v code %q text %q",
			a.GetTopic(), a.GetPartition(), a.GetKind(), a.GetCode(), a.GetText(), topic, kind, code, text)
	}
}

// A write that would fit the follower's log is refused while its epoch for
// write is earlier than the partition's, and nothing is written. One of a
// later epoch is a leader elected since that reached the follower before
// its watch did: it is appended and acknowledged in that epoch, and from
// then on the partition's epoch is refused as earlier.
func TestFollowerRefusesAnEarlierEpochAndTakesALaterOne(t *testing.T) {
	f := newFollowerFixture(t, "fepoch")
	last := f.records(t)
	next := uint64(last[len(last)-1].LastMsgLogID) + 1
	rec, data := f.next(t, []uint64{next, next + 1}, int64(next), int64(next+1), 2)
	commits, seg := f.commitLog(t), f.segment(t)
	a := f.leader.write(t, f.replicaWrite(t, f.st.EpochForWrite-1, rec, data))
	checkAck(t, a, f.topic, messages.ErrorKind_ERROR_KIND_TEMPORARY, "E_FAILED_ON_NOT_WRITABLE", "epoch for write mismatch")
	f.unchanged(t, commits, seg)

	later := f.st.EpochForWrite + 1
	a = f.leader.write(t, f.replicaWrite(t, later, rec, data))
	checkAck(t, a, f.topic, messages.ErrorKind_ERROR_KIND_NONE, "", "")
	if a.GetEpochForWrite() != later {
		t.Fatalf("acknowledged in epoch %d, want the write's %d", a.GetEpochForWrite(), later)
	}
	recs := f.records(t)
	if len(recs) != len(last)+1 || recs[len(recs)-1] != rec {
		t.Fatalf("after the write of a later epoch the last record is %+v of %d, want %+v of %d",
			recs[len(recs)-1], len(recs), rec, len(last)+1)
	}
	if got := f.segment(t); !bytes.Equal(got, append(seg, data...)) {
		t.Fatalf("data file is %d bytes, want %d ending in the write", len(got), len(seg)+len(data))
	}

	after := uint64(rec.LastMsgLogID) + 1
	rec2, data2 := f.next(t, []uint64{after}, int64(after), int64(after), 1)
	commits, seg = f.commitLog(t), f.segment(t)
	a = f.leader.write(t, f.replicaWrite(t, f.st.EpochForWrite, rec2, data2))
	checkAck(t, a, f.topic, messages.ErrorKind_ERROR_KIND_TEMPORARY, "E_FAILED_ON_NOT_WRITABLE", "epoch for write mismatch")
	f.unchanged(t, commits, seg)
}

// A leader that reconnects resends writes the follower may have committed;
// a resent record that matches the committed one is acknowledged and not
// written a second time.
func TestFollowerAcksResentLastRecordWithoutWriting(t *testing.T) {
	f := newFollowerFixture(t, "fresend")
	recs := f.records(t)
	cases := []struct {
		name string
		rec  storage.CommitRecord
	}{
		{"last record", recs[len(recs)-1]},
		{"first record", recs[0]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			commits, seg := f.commitLog(t), f.segment(t)
			a := f.leader.write(t, f.replicaWrite(t, f.st.EpochForWrite, tc.rec, f.data(t, tc.rec)))
			checkAck(t, a, f.topic, messages.ErrorKind_ERROR_KIND_NONE, "", "")
			f.unchanged(t, commits, seg)
		})
	}
}

// A write for the next position whose messages do not carry the IDs its
// record names is refused as not fitting this replica, before any offset or
// size check, and nothing is written.
func TestFollowerRejectsMismatchedBatchIDs(t *testing.T) {
	f := newFollowerFixture(t, "fbatch")
	recs := f.records(t)
	last := recs[len(recs)-1]
	next := uint64(last.LastMsgLogID) + 1
	earlier := f.data(t, recs[0]) // a single message with the partition's first ID

	cases := []struct {
		name    string
		ids     []uint64
		first   int64
		lastID  int64
		num     int32
		payload []byte // instead of the encoded ids
	}{
		{name: "bytes of an earlier record", first: int64(next), lastID: int64(next), num: 1, payload: earlier},
		{name: "first ID differs", ids: []uint64{next + 1, next + 2}, first: int64(next), lastID: int64(next + 2), num: 2},
		{name: "last ID differs", ids: []uint64{next, next + 1}, first: int64(next), lastID: int64(next + 2), num: 2},
		{name: "count differs", ids: []uint64{next, next + 2}, first: int64(next), lastID: int64(next + 2), num: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec, data := f.next(t, tc.ids, tc.first, tc.lastID, tc.num)
			if tc.payload != nil {
				data = tc.payload
				rec.MsgSize = int32(len(data))
			}
			commits, seg := f.commitLog(t), f.segment(t)
			a := f.leader.write(t, f.replicaWrite(t, f.st.EpochForWrite, rec, data))
			checkAck(t, a, f.topic, messages.ErrorKind_ERROR_KIND_FOLLOWER, "E_FAILED_ON_NOT_WRITABLE", "record does not match its messages")
			f.unchanged(t, commits, seg)
		})
	}
}
