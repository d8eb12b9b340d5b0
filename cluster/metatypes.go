package cluster

import (
	"math"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/partitamq/partita/messages"
)

// TopicMeta and ChannelMeta are plain copies of messages.TopicMeta and
// messages.ChannelMeta: generated protobuf structs must not be copied, and
// callers want values. etcd holds the protobuf encoding.

type TopicMeta struct {
	Name            string
	Partitions      int32
	Replicas        int32
	Paused          bool
	CreatedUnixNano int64
	Ordered         bool
	Ext             bool // messages may carry JSON headers (youzan's extend)
	// youzan's per-topic settings; 0 takes the node's flag.
	SyncEvery                int32 // commits between fsyncs (youzan's syncdisk)
	RetentionDays            int32 // youzan's retention
	DisableChannelAutoCreate bool  // SUB needs a channel made by /channel/create
	DedupeWindowMs           int64 // idempotent publish window (topic.DedupeConfig)
}

type ChannelMeta struct {
	Topic   string
	Name    string
	Paused  bool
	Ordered bool
	Skipped bool
	// RateLimitKB limits delivery to this many kilobytes a second; 0 is
	// no limit.
	RateLimitKB int64
	// MaxAttempts bounds a message's deliveries on the channel; past
	// them it goes to the dead-letter topic. 0 is no bound.
	MaxAttempts uint16
	// ClientLimits cap the RDY of the channel's consumers by prefix,
	// sorted by prefix (WithClientLimit).
	ClientLimits []ClientLimit
	// Revision is the etcd revision the metadata was stored at, as read
	// back (not stored itself); 0 when it was not read from etcd.
	Revision int64
}

// ClientLimit caps at Ready the RDY of a channel's consumers whose client
// ID or remote address starts with Prefix.
type ClientLimit struct {
	Prefix string
	Ready  int64
}

// WithClientLimit is limits with the cap of prefix set to ready, or gone
// when ready is negative, sorted by prefix; limits itself is not changed.
func WithClientLimit(limits []ClientLimit, prefix string, ready int64) []ClientLimit {
	out := slices.DeleteFunc(slices.Clone(limits), func(l ClientLimit) bool { return l.Prefix == prefix })
	if ready >= 0 {
		out = append(out, ClientLimit{Prefix: prefix, Ready: ready})
		slices.SortFunc(out, func(a, b ClientLimit) int { return strings.Compare(a.Prefix, b.Prefix) })
	}
	return out
}

func marshalTopic(m TopicMeta) ([]byte, error) {
	return proto.Marshal(&messages.TopicMeta{
		Name:                     m.Name,
		Partitions:               m.Partitions,
		Replicas:                 m.Replicas,
		Paused:                   m.Paused,
		CreatedUnixNano:          m.CreatedUnixNano,
		Ordered:                  m.Ordered,
		Ext:                      m.Ext,
		SyncEvery:                m.SyncEvery,
		RetentionDays:            m.RetentionDays,
		DisableChannelAutoCreate: m.DisableChannelAutoCreate,
		DedupeWindowMs:           m.DedupeWindowMs,
	})
}

func unmarshalTopic(b []byte) (TopicMeta, error) {
	var pb messages.TopicMeta
	if err := proto.Unmarshal(b, &pb); err != nil {
		return TopicMeta{}, err
	}
	return TopicMeta{
		Name:                     pb.GetName(),
		Partitions:               pb.GetPartitions(),
		Replicas:                 pb.GetReplicas(),
		Paused:                   pb.GetPaused(),
		CreatedUnixNano:          pb.GetCreatedUnixNano(),
		Ordered:                  pb.GetOrdered(),
		Ext:                      pb.GetExt(),
		SyncEvery:                pb.GetSyncEvery(),
		RetentionDays:            pb.GetRetentionDays(),
		DisableChannelAutoCreate: pb.GetDisableChannelAutoCreate(),
		DedupeWindowMs:           pb.GetDedupeWindowMs(),
	}, nil
}

func marshalChannel(m ChannelMeta) ([]byte, error) {
	pb := &messages.ChannelMeta{Topic: m.Topic, Name: m.Name, Paused: m.Paused, Ordered: m.Ordered, Skipped: m.Skipped,
		RateLimitKb: m.RateLimitKB, MaxAttempts: uint32(m.MaxAttempts)}
	for _, l := range m.ClientLimits {
		pb.ClientLimits = append(pb.ClientLimits, &messages.ClientLimit{Prefix: l.Prefix, Ready: l.Ready})
	}
	return proto.Marshal(pb)
}

func unmarshalChannel(b []byte) (ChannelMeta, error) {
	var pb messages.ChannelMeta
	if err := proto.Unmarshal(b, &pb); err != nil {
		return ChannelMeta{}, err
	}
	m := ChannelMeta{Topic: pb.GetTopic(), Name: pb.GetName(), Paused: pb.GetPaused(), Ordered: pb.GetOrdered(), Skipped: pb.GetSkipped(),
		RateLimitKB: pb.GetRateLimitKb(), MaxAttempts: uint16(min(pb.GetMaxAttempts(), math.MaxUint16))}
	for _, l := range pb.GetClientLimits() {
		m.ClientLimits = append(m.ClientLimits, ClientLimit{Prefix: l.GetPrefix(), Ready: l.GetReady()})
	}
	return m, nil
}

// PartitionState's Revision is not part of the encoding: it is the key's
// etcd ModRevision, filled in when read.
func marshalPartition(s PartitionState) ([]byte, error) {
	return proto.Marshal(&messages.PartitionState{
		Topic:         s.Topic,
		Partition:     s.Partition,
		Leader:        s.Leader,
		Isr:           s.ISR,
		Catchup:       s.Catchup,
		EpochForWrite: s.EpochForWrite,
		LeaderSession: s.LeaderSession,
		Replicas:      s.Replicas,
		WriteDisabled: s.WriteDisabled,
		Preferred:     s.Preferred,
		MoveAdd:       s.Move.Add,
		MoveRemove:    s.Move.Remove,
	})
}

func unmarshalPartition(b []byte, revision int64) (PartitionState, error) {
	var pb messages.PartitionState
	if err := proto.Unmarshal(b, &pb); err != nil {
		return PartitionState{}, err
	}
	return PartitionState{
		Topic:         pb.GetTopic(),
		Partition:     pb.GetPartition(),
		Leader:        pb.GetLeader(),
		ISR:           pb.GetIsr(),
		Catchup:       pb.GetCatchup(),
		EpochForWrite: pb.GetEpochForWrite(),
		LeaderSession: pb.GetLeaderSession(),
		Replicas:      pb.GetReplicas(),
		WriteDisabled: pb.GetWriteDisabled(),
		Preferred:     pb.GetPreferred(),
		Move:          Move{Add: pb.GetMoveAdd(), Remove: pb.GetMoveRemove()},
		Revision:      revision,
	}, nil
}

func marshalNode(n NodeInfo) ([]byte, error) {
	return proto.Marshal(&messages.NodeInfo{
		Id:             n.ID,
		ClusterAddress: n.ClusterAddress,
		TcpAddress:     n.TCPAddress,
		HttpAddress:    n.HTTPAddress,
		Hostname:       n.Hostname,
		Zone:           n.Zone,
		Leaving:        n.Leaving,
	})
}

func unmarshalNode(b []byte) (NodeInfo, error) {
	var pb messages.NodeInfo
	if err := proto.Unmarshal(b, &pb); err != nil {
		return NodeInfo{}, err
	}
	return NodeInfo{
		ID:             pb.GetId(),
		ClusterAddress: pb.GetClusterAddress(),
		TCPAddress:     pb.GetTcpAddress(),
		HTTPAddress:    pb.GetHttpAddress(),
		Hostname:       pb.GetHostname(),
		Zone:           pb.GetZone(),
		Leaving:        pb.GetLeaving(),
	}, nil
}
