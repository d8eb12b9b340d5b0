package replication

import (
	"testing"

	"github.com/partitamq/partita/messages"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

func fuzzFrame(f *messages.LeaderFrame) []byte {
	b, err := proto.Marshal(f)
	if err != nil {
		panic(err)
	}
	return b
}

// FuzzLeaderFrame decodes random bytes as the replication server does (the
// grpc proto codec into a LeaderFrame) and hands the frame to the stream's
// dispatcher. It must never panic; a write reaches the partition only if it
// passed checkWrite, and every frame gets at most one answer.
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
		f.Add(fuzzFrame(fr))
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x12, 0x02, 0x10, 0x01, 0x1a})
	codec := encoding.GetCodecV2("proto")
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := new(messages.LeaderFrame)
		if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, fr); err != nil {
			return
		}
		rec := &recorder{}
		st := &serverStream{srv: &Server{applier: rec}, acks: ackQueue{ready: make(chan struct{}, 1)}, done: make(chan struct{})}
		st.handle(fr)
		acks := st.acks.take()
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
	})
}

// answerable counts the frames in f that may get an answer: writes and
// offset updates with a SyncId, in f or in its batch (not nested deeper).
func answerable(f *messages.LeaderFrame) int {
	n := 0
	for _, fr := range append([]*messages.LeaderFrame{f}, f.GetBatch().GetFrames()...) {
		switch b := fr.GetBody().(type) {
		case *messages.LeaderFrame_Write:
			n++
		case *messages.LeaderFrame_Offset:
			if b.Offset.GetSyncId() != 0 {
				n++
			}
		}
	}
	return n
}
