package topic

import (
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// Conversions between the write flow's types and the protobuf messages a
// leader and its followers exchange (messages/partita.proto).

// replicaWrite is a record and its messages as a follower receives them.
func (a *Actor) replicaWrite(epochForWrite int64, rec storage.CommitRecord, prev RecordRef, data []byte) *messages.ReplicaWrite {
	w := &messages.ReplicaWrite{
		Topic: a.opt.Topic, Partition: a.opt.Partition, EpochForWrite: epochForWrite,
		Record: recordToProto(rec), Messages: data,
	}
	if prev != (RecordRef{}) {
		w.Prev = &messages.RecordRef{LogId: prev.LogID, Epoch: prev.Epoch}
	}
	return w
}

// emptyProbe asks a replica catching up whether it holds no record, as
// this leader's log does.
func (a *Actor) emptyProbe(epochForWrite int64) *messages.ReplicaWrite {
	return &messages.ReplicaWrite{Topic: a.opt.Topic, Partition: a.opt.Partition, EpochForWrite: epochForWrite, EmptyLog: true}
}

func kindToProto(k ErrorKind) messages.ErrorKind {
	switch k {
	case KindLocal:
		return messages.ErrorKind_ERROR_KIND_LOCAL
	case KindFollower:
		return messages.ErrorKind_ERROR_KIND_FOLLOWER
	case KindTemporary:
		return messages.ErrorKind_ERROR_KIND_TEMPORARY
	case KindCluster:
		return messages.ErrorKind_ERROR_KIND_CLUSTER
	}
	return messages.ErrorKind_ERROR_KIND_NONE
}

func recordToProto(r storage.CommitRecord) *messages.CommitRecord {
	return &messages.CommitRecord{LogId: r.LogID, Epoch: r.Epoch, LastMsgLogId: r.LastMsgLogID, MsgOffset: r.MsgOffset, MsgSize: r.MsgSize, MsgCnt: r.MsgCnt, MsgNum: r.MsgNum}
}

func recordFromProto(r *messages.CommitRecord) storage.CommitRecord {
	return storage.CommitRecord{LogID: r.GetLogId(), Epoch: r.GetEpoch(), LastMsgLogID: r.GetLastMsgLogId(), MsgOffset: r.GetMsgOffset(), MsgSize: r.GetMsgSize(), MsgCnt: r.GetMsgCnt(), MsgNum: r.GetMsgNum()}
}

// offsetUpdate is a channel's confirmed offset as a follower receives it.
func (a *Actor) offsetUpdate(name string, u channel.OffsetUpdate) *messages.ChannelOffsetUpdate {
	pb := &messages.ChannelOffsetUpdate{
		Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: name,
		VOffset: u.Offset, VCnt: u.Count, Flush: u.Flush,
		AllowBackward: u.AllowBackward, NeedUpdateConfirmed: u.ReplaceIntervals,
		EpochForWrite: a.offsetEpoch(),
	}
	for _, iv := range u.Intervals {
		pb.ConfirmedIntervals = append(pb.ConfirmedIntervals, &messages.Interval{Start: iv.Start, End: iv.End, Count: iv.Count})
	}
	return pb
}

// offsetEpoch stamps a leader's channel positions with its epoch
// (Follower.OffsetFrom).
func (a *Actor) offsetEpoch() int64 {
	if a.writer == nil {
		return 0
	}
	return a.writer.Epoch()
}

func offsetUpdateFromProto(pb *messages.ChannelOffsetUpdate) channel.OffsetUpdate {
	u := channel.OffsetUpdate{
		Offset: pb.GetVOffset(), Count: pb.GetVCnt(), Flush: pb.GetFlush(),
		AllowBackward: pb.GetAllowBackward(), ReplaceIntervals: pb.GetNeedUpdateConfirmed(),
	}
	for _, iv := range pb.GetConfirmedIntervals() {
		u.Intervals = append(u.Intervals, storage.Interval{Start: iv.GetStart(), End: iv.GetEnd(), Count: iv.GetCount()})
	}
	return u
}

func refsToProto(refs []RecordRef) []*messages.RecordRef {
	var out []*messages.RecordRef
	for _, r := range refs {
		out = append(out, &messages.RecordRef{LogId: r.LogID, Epoch: r.Epoch})
	}
	return out
}

func refsFromProto(pbs []*messages.RecordRef) []RecordRef {
	refs := make([]RecordRef, len(pbs))
	for i, r := range pbs {
		refs[i] = RecordRef{LogID: r.GetLogId(), Epoch: r.GetEpoch()}
	}
	return refs
}
