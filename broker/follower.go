package broker

import (
	"fmt"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
)

// ApplyWrite hands a leader's write to the local follower partition; the
// replication server calls it for every write frame. It never waits: a
// write for a topic this node has not opened yet queues while the topic
// opens (a leader can write before this node has heard of the topic).
func (b *Broker) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	if b.opening.queueBehind(w, reply) {
		return
	}
	if b.partitionPID(w.GetTopic(), w.GetPartition()) == nil && b.Topic(w.GetTopic()) == nil {
		b.openThenApply(w, reply)
		return
	}
	b.applyWrite(w, reply)
}

// ApplyOffset hands a leader's channel offset to the local follower
// partition. One for a partition not here yet is dropped: the leader's
// channels report in full again when this replica joins the ISR.
func (b *Broker) ApplyOffset(u *messages.ChannelOffsetUpdate, reply func(*messages.ReplicaAck)) {
	pid := b.partitionPID(u.GetTopic(), u.GetPartition())
	if pid == nil {
		if reply != nil {
			reply(&messages.ReplicaAck{
				Topic: u.GetTopic(), Partition: u.GetPartition(), Channel: u.GetChannel(), OffsetSyncId: u.GetSyncId(),
				Kind: messages.ErrorKind_ERROR_KIND_TEMPORARY, Code: topic.ErrNotLeader.Code, Text: "no replica of the partition on this node",
			})
		}
		return
	}
	b.system.Root.Send(pid, &topic.OffsetArrived{Update: u, Reply: reply})
}

// applyWrite hands w to its partition actor, or refuses it when this node
// holds no replica of the partition.
func (b *Broker) applyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	pid := b.partitionPID(w.GetTopic(), w.GetPartition())
	if pid == nil {
		reply(&messages.ReplicaAck{
			Topic: w.GetTopic(), Partition: w.GetPartition(), LogId: w.GetRecord().GetLogId(),
			Kind: messages.ErrorKind_ERROR_KIND_TEMPORARY, Code: topic.ErrNotLeader.Code,
			Text: fmt.Sprintf("no replica of %s/%d on this node", w.GetTopic(), w.GetPartition()),
		})
		return
	}
	b.system.Root.Send(pid, &topic.ReplicaWriteArrived{Write: w, Reply: reply})
}
