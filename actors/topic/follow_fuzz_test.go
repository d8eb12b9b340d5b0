package topic

import (
	"testing"

	"github.com/partitamq/partita/storage"
)

// fuzzCommitted is the one record the fuzzed follower has committed: three
// messages of epoch 1 at the start of the log.
var fuzzCommitted = storage.CommitRecord{LogID: 1, Epoch: 1, LastMsgLogID: 3, MsgOffset: 0, MsgSize: 3 * 34, MsgCnt: 1, MsgNum: 3}

func fuzzFollower() *Follower {
	pos := Position{NextID: 4, End: fuzzCommitted.End(), Count: 3, Last: Ref(fuzzCommitted)}
	return NewFollower(1, pos, func(id int64) (storage.CommitRecord, int64, bool) {
		if id == fuzzCommitted.LogID {
			return fuzzCommitted, 0, true
		}
		return storage.CommitRecord{}, 0, false
	})
}

// fuzzPayload encodes messages with the given IDs and 4-byte bodies.
func fuzzPayload(ids ...uint64) []byte {
	var b []byte
	for _, id := range ids {
		b = storage.AppendMessage(b, &storage.Message{ID: id, Timestamp: 1, Body: []byte("body")})
	}
	return b
}

// FuzzFollowerCheck feeds the follower core random records and payloads. It
// must never panic, and a write it accepts must be exactly what its record
// says: MsgNum decodable messages with strictly increasing IDs from LogID to
// LastMsgLogID, MsgSize bytes, placed at the end of this replica's log.
func FuzzFollowerCheck(f *testing.F) {
	end := fuzzCommitted.End()
	next := fuzzPayload(4, 5)
	f.Add(next, int64(4), int64(5), end, int32(len(next)), int64(4), int32(2), int64(1), int64(1), int64(1))
	f.Add(fuzzPayload(1, 2, 3), int64(1), int64(3), int64(0), int32(end), int64(1), int32(3), int64(1), int64(0), int64(0))
	f.Add(fuzzPayload(4, 9, 6), int64(4), int64(6), end, int32(end), int64(4), int32(3), int64(1), int64(1), int64(1))
	f.Add(fuzzPayload(4, 4), int64(4), int64(4), end, int32(len(next)), int64(4), int32(2), int64(1), int64(1), int64(1))
	f.Add(fuzzPayload(7), int64(7), int64(7), int64(0), int32(34), int64(1), int32(1), int64(1), int64(0), int64(0))
	f.Add(next[:40], int64(4), int64(5), end, int32(40), int64(4), int32(2), int64(1), int64(1), int64(1))
	f.Add([]byte{}, int64(0), int64(0), int64(0), int32(0), int64(0), int32(0), int64(2), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, logID, lastID, msgOffset int64, msgSize int32, msgCnt int64, msgNum int32, epoch, prevLogID, prevEpoch int64) {
		fl := fuzzFollower()
		rec := storage.CommitRecord{LogID: logID, Epoch: epoch, LastMsgLogID: lastID, MsgOffset: msgOffset, MsgSize: msgSize, MsgCnt: msgCnt, MsgNum: msgNum}
		w := ReplicaWriteIn{EpochForWrite: 1, Record: rec, Prev: RecordRef{LogID: prevLogID, Epoch: prevEpoch}, Data: data}
		d := fl.Check(w)
		if d.Append && (d.Duplicate || d.Err != nil) {
			t.Fatalf("decision both appends and refuses: %+v", d)
		}
		if d.Err != nil && d.Err.Code == "" {
			t.Fatalf("refusal without a code: %+v", d)
		}
		if !d.Append {
			return
		}
		if why := payloadMismatch(rec, data); why != "" {
			t.Fatalf("accepted record %+v whose payload %s", rec, why)
		}
		at := fl.Position().End
		if d.Truncate != nil {
			at = d.Truncate.Pos.End
		}
		if rec.MsgOffset != at {
			t.Fatalf("accepted record at offset %d, log ends at %d", rec.MsgOffset, at)
		}
	})
}

// payloadMismatch re-derives the record from the payload independently of
// checkArgs and says how they differ, or "" when they agree.
func payloadMismatch(rec storage.CommitRecord, data []byte) string {
	if int64(len(data)) != int64(rec.MsgSize) {
		return "has the wrong size"
	}
	var ids []uint64
	for rest := data; len(rest) > 0; {
		m, n, err := storage.DecodeMessage(rest)
		if err != nil {
			return "does not decode: " + err.Error()
		}
		if len(ids) > 0 && m.ID <= ids[len(ids)-1] {
			return "has IDs that do not increase"
		}
		ids = append(ids, m.ID)
		rest = rest[n:]
	}
	switch {
	case len(ids) != int(rec.MsgNum):
		return "has the wrong message count"
	case int64(ids[0]) != rec.LogID:
		return "does not start at LogID"
	case int64(ids[len(ids)-1]) != rec.LastMsgLogID:
		return "does not end at LastMsgLogID"
	}
	return ""
}
