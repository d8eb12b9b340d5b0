package replication

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/proto"
)

// fuzzFrames puts frames on the wire as a leader's stream does.
func fuzzFrames(frames ...*messages.LeaderFrame) []byte {
	var wire []byte
	for _, f := range frames {
		b, err := proto.Marshal(f)
		if err != nil {
			panic(err)
		}
		wire = binary.BigEndian.AppendUint32(wire, uint32(len(b)))
		wire = append(wire, b...)
	}
	return wire
}

// FuzzLeaderFrame reads random bytes as the replication server reads what
// follows a leader's preface (length-prefixed LeaderFrames) and hands each
// frame to the stream's dispatcher. It must never panic; a write reaches
// the partition only if it passed checkWrite, and every frame gets at most
// one answer.
func FuzzLeaderFrame(f *testing.F) {
	write := &messages.ReplicaWrite{
		Topic: "orders", Partition: 3, EpochForWrite: 7, LeaderSession: "n1:1",
		Record:   &messages.CommitRecord{LogId: 100, Epoch: 7, LastMsgLogId: 100, MsgOffset: 0, MsgSize: 34, MsgCnt: 1, MsgNum: 1},
		Messages: make([]byte, 34),
	}
	for _, fr := range []*messages.LeaderFrame{
		{Body: &messages.LeaderFrame_Write{Write: write}},
		{Body: &messages.LeaderFrame_Write{Write: &messages.ReplicaWrite{Topic: "t"}}},
		{Body: &messages.LeaderFrame_Write{}},
		{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{Topic: "orders", Channel: "c", Partition: 1, SyncId: 9}}},
		{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{Topic: "orders", Partition: -1}}},
		{Body: &messages.LeaderFrame_Heartbeat{Heartbeat: &messages.Heartbeat{NodeId: "n1", UnixNano: 1}}},
		{},
		leaderBatch([]*messages.LeaderFrame{
			{Body: &messages.LeaderFrame_Write{Write: write}},
			{Body: &messages.LeaderFrame_Offset{Offset: &messages.ChannelOffsetUpdate{Topic: "orders", Channel: "c", Partition: 1, SyncId: 9}}},
			leaderBatch([]*messages.LeaderFrame{{Body: &messages.LeaderFrame_Write{Write: write}}}),
		}),
	} {
		f.Add(fuzzFrames(fr))
	}
	f.Add(fuzzFrames(&messages.LeaderFrame{Body: &messages.LeaderFrame_Write{Write: write}}, &messages.LeaderFrame{}))
	f.Add([]byte{0, 0, 0, 6, 0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0, 0, 0, 5, 0x12, 0x02, 0x10, 0x01, 0x1a})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := newFrameReader(bytes.NewReader(in))
		for {
			fr := new(messages.LeaderFrame)
			if err := r.read(fr); err != nil {
				return
			}
			checkHandled(t, fr)
		}
	})
}

// checkHandled hands one decoded frame to a fresh stream and checks what
// reached the partition and what was answered.
func checkHandled(t *testing.T, fr *messages.LeaderFrame) {
	rec := &recorder{}
	st := &serverStream{srv: &Server{applier: rec}, out: newOutbox[*messages.FollowerFrame]()}
	st.handle(fr, false)
	var acks []*messages.ReplicaAck
	for _, f := range st.out.take() {
		acks = append(acks, f.GetAck())
	}
	if n := answerable(fr); len(acks) > n {
		t.Fatalf("a frame with %d writes and acknowledged offsets got %d answers", n, len(acks))
	}
	for _, w := range rec.writes {
		if err := checkWrite(w); err != nil {
			t.Fatalf("write that fails its check reached the partition: %v", err)
		}
	}
	for _, u := range rec.offsets {
		if err := checkOffset(u); err != nil {
			t.Fatalf("offset update that fails its check reached the partition: %v", err)
		}
	}
	if _, isWrite := fr.GetBody().(*messages.LeaderFrame_Write); isWrite && len(rec.writes) == 0 {
		if len(acks) != 1 || acks[0].GetCode() == "" {
			t.Fatalf("refused write without a coded refusal: %v", acks)
		}
	}
}

// answerable counts the frames in f that may get an answer: writes, frames
// of writes that hold any, and offset updates with a SyncId, in f or in its
// batch (not nested deeper).
func answerable(f *messages.LeaderFrame) int {
	n := 0
	for _, fr := range append([]*messages.LeaderFrame{f}, f.GetBatch().GetFrames()...) {
		switch b := fr.GetBody().(type) {
		case *messages.LeaderFrame_Write:
			n++
		case *messages.LeaderFrame_Writes:
			if len(b.Writes.GetWrites()) > 0 {
				n++ // one ReplicaAcks for the frame
			}
		case *messages.LeaderFrame_Offset:
			if b.Offset.GetSyncId() != 0 {
				n++
			}
		}
	}
	return n
}
