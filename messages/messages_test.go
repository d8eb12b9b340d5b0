package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		msg   proto.Message
		empty func() proto.Message
	}{
		{
			name: "ReplicaWrite",
			msg: &ReplicaWrite{
				Topic:              "orders",
				Partition:          3,
				EpochForWrite:      7,
				LeaderSessionEpoch: 2,
				LeaderSession:      "node-1:42",
				Record: &CommitRecord{
					LogId:        100,
					Epoch:        7,
					LastMsgLogId: 102,
					MsgOffset:    4096,
					MsgSize:      123,
					MsgCnt:       51,
					MsgNum:       3,
				},
				Messages: []byte{0, 0, 0, 5, 'h', 'e', 'l', 'l', 'o'},
			},
			empty: func() proto.Message { return &ReplicaWrite{} },
		},
		{
			name: "ChannelOffsetUpdate",
			msg: &ChannelOffsetUpdate{
				Topic:         "orders",
				Partition:     3,
				Channel:       "billing",
				VOffset:       8192,
				VCnt:          80,
				Flush:         true,
				AllowBackward: true,
				ConfirmedIntervals: []*Interval{
					{Start: 9000, End: 9100},
					{Start: 9300, End: 9400},
				},
				NeedUpdateConfirmed: true,
			},
			empty: func() proto.Message { return &ChannelOffsetUpdate{} },
		},
		{
			name:  "zero ReplicaWrite",
			msg:   &ReplicaWrite{},
			empty: func() proto.Message { return &ReplicaWrite{} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wire, err := proto.Marshal(tt.msg)
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			got := tt.empty()
			if err := proto.Unmarshal(wire, got); err != nil {
				t.Fatalf("unmarshal: %v", err)
			}
			if !proto.Equal(got, tt.msg) {
				t.Errorf("round trip changed the message:\n got %v\nwant %v", got, tt.msg)
			}
		})
	}
}

func TestUnmarshalRejectsGarbage(t *testing.T) {
	// A truncated frame from a peer must come back as an error, not a panic.
	full, err := proto.Marshal(&ReplicaWrite{Topic: "orders", Messages: []byte("payload")})
	if err != nil {
		t.Fatal(err)
	}
	for _, wire := range [][]byte{full[:len(full)-1], {0xff}, {0x0a, 0x80}} {
		if err := proto.Unmarshal(wire, &ReplicaWrite{}); err == nil {
			t.Errorf("unmarshal of %x succeeded", wire)
		}
	}
}
