package messages

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// vtCodec is what the replication sessions encode and decode frames with
// (partita_vtproto.pb.go).
type vtCodec interface {
	proto.Message
	MarshalVT() ([]byte, error)
	UnmarshalVT([]byte) error
}

func sampleFrames() []vtCodec {
	write := &ReplicaWrite{
		Topic: "orders", Partition: 3, EpochForWrite: 7, LeaderSessionEpoch: 2, LeaderSession: "n1:42",
		Record:   &CommitRecord{LogId: 100, Epoch: 7, LastMsgLogId: 102, MsgOffset: 4096, MsgSize: 123, MsgCnt: 51, MsgNum: 3},
		Messages: []byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'},
		Prev:     &RecordRef{LogId: 99, Epoch: 6},
		FullSync: true,
	}
	offset := &ChannelOffsetUpdate{
		Topic: "orders", Partition: 3, Channel: "billing", VOffset: 8192, VCnt: 80, Flush: true,
		ConfirmedIntervals: []*Interval{{Start: 9000, End: 9100}, {Start: 9300, End: 9400, Count: 2}},
		SyncId:             -1,
	}
	ack := &ReplicaAck{
		Topic: "orders", Partition: 3, LogId: 100, Kind: ErrorKind_ERROR_KIND_FOLLOWER, Code: "E_X", Text: "why",
		Behind: true, FollowerEnd: 4096, FollowerRecords: []*RecordRef{{LogId: 1, Epoch: 1}}, EpochForWrite: 7,
	}
	return []vtCodec{
		&LeaderFrame{Body: &LeaderFrame_Write{Write: write}},
		&LeaderFrame{Body: &LeaderFrame_Offset{Offset: offset}},
		&LeaderFrame{Body: &LeaderFrame_Heartbeat{Heartbeat: &Heartbeat{NodeId: "n1", UnixNano: 1}}},
		&LeaderFrame{Body: &LeaderFrame_Batch{Batch: &LeaderBatch{Frames: []*LeaderFrame{
			{Body: &LeaderFrame_Write{Write: write}}, {Body: &LeaderFrame_Offset{Offset: offset}}, {},
		}}}},
		&LeaderFrame{Body: &LeaderFrame_Writes{Writes: &ReplicaWrites{Writes: []*ReplicaWrite{write, {Topic: "t"}}}}},
		&LeaderFrame{},
		&FollowerFrame{Body: &FollowerFrame_Ack{Ack: ack}},
		&FollowerFrame{Body: &FollowerFrame_Batch{Batch: &FollowerBatch{Frames: []*FollowerFrame{
			{Body: &FollowerFrame_Ack{Ack: ack}}, {Body: &FollowerFrame_Heartbeat{Heartbeat: &Heartbeat{NodeId: "n2"}}},
		}}}},
		&FollowerFrame{Body: &FollowerFrame_Acks{Acks: &ReplicaAcks{Acks: []*ReplicaAck{ack, {}}}}},
		&FollowerFrame{},
	}
}

// A node decoding frames with vtprotobuf's code reads what one encoding
// with protobuf's reflection wrote, and the other way round: nodes of
// either build, as in a rolling upgrade, understand each other.
func TestVTEncodingIsProtobufs(t *testing.T) {
	for _, m := range sampleFrames() {
		vt, err := m.MarshalVT()
		if err != nil {
			t.Fatalf("MarshalVT(%v): %v", m, err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := proto.Unmarshal(vt, back); err != nil || !proto.Equal(back, m) {
			t.Errorf("proto.Unmarshal of MarshalVT(%v) = %v, %v", m, back, err)
		}
		std, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		got := m.ProtoReflect().New().Interface().(vtCodec)
		if err := got.UnmarshalVT(std); err != nil || !proto.Equal(got, m) {
			t.Errorf("UnmarshalVT of proto.Marshal(%v) = %v, %v", m, got, err)
		}
	}
}

// FuzzVTDecodesAsProtobuf decodes random bytes as a LeaderFrame and as a
// FollowerFrame both ways: whatever protobuf's decoding accepts,
// vtprotobuf's must accept as the same message (the same known fields:
// unknown ones are kept as bytes, which the two keep alike but for
// encodings that are not the shortest, and no node reads them), but a known field on the
// wire with a type other than its own, which protobuf's keeps as an
// unknown field and vtprotobuf's refuses. vtprotobuf's accepts more than
// protobuf's in turn (strings that are not UTF-8, unknown groups whose end
// does not match their start); none of it is what a node's encoding
// writes, and what it makes of such input must encode again without
// failing.
func FuzzVTDecodesAsProtobuf(f *testing.F) {
	for _, m := range sampleFrames() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, empty := range []func() vtCodec{
			func() vtCodec { return &LeaderFrame{} },
			func() vtCodec { return &FollowerFrame{} },
		} {
			std, vt := empty(), empty()
			stdErr, vtErr := proto.Unmarshal(in, std), vt.UnmarshalVT(in)
			if vtErr == nil {
				if _, err := vt.MarshalVT(); err != nil {
					t.Fatalf("%T: MarshalVT of what UnmarshalVT decoded: %v", vt, err)
				}
			}
			switch {
			case stdErr != nil:
			case vtErr != nil && !strings.Contains(vtErr.Error(), "wrong wireType"):
				t.Fatalf("%T: protobuf decoded %v, vtprotobuf refused: %v", std, std, vtErr)
			case vtErr == nil && !proto.Equal(known(std), known(vt)):
				t.Fatalf("%T: protobuf decoded %v, vtprotobuf %v", std, std, vt)
			case vtErr == nil:
				out, _ := vt.MarshalVT()
				again := empty()
				if err := proto.Unmarshal(out, again); err != nil || !proto.Equal(known(again), known(vt)) {
					t.Fatalf("MarshalVT(%v) decodes to %v, %v", vt, again, err)
				}
			}
		}
	})
}

// known is a copy of m without the unknown fields of any message in it.
func known(m proto.Message) proto.Message {
	c := proto.Clone(m)
	dropUnknown(c.ProtoReflect())
	return c
}

func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Message() == nil:
		case fd.IsList():
			for i := range v.List().Len() {
				dropUnknown(v.List().Get(i).Message())
			}
		default:
			dropUnknown(v.Message())
		}
		return true
	})
}
