package broker

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/messages"
)

// ApplyWrite hands a leader's write to the local follower partition; the
// replication server calls it for every write frame. It never waits: a
// write for a topic or a partition this node has not opened yet queues
// while it opens (a leader can write before this node's watches have told
// it of the topic, or of a partition an expand or a repair placed here).
func (b *Broker) ApplyWrite(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) {
	if b.opening.queueBehind(w, reply) {
		return
	}
	if b.partitionPID(w.GetTopic(), w.GetPartition()) == nil {
		if t := b.Topic(w.GetTopic()); t == nil {
			b.openThenApply(w, reply, func(ctx context.Context) { b.openFromMeta(ctx, w.GetTopic()) })
		} else {
			b.openThenApply(w, reply, func(ctx context.Context) { b.startPlaced(ctx, t, w.GetPartition()) })
		}
		return
	}
	b.applyWrite(w, reply)
}

// ApplyWrites hands a leader's frame of writes of one partition to the
// local follower partition in one message. While the topic opens, or when
// this node has no replica of it, the writes take ApplyWrite's path one by
// one and their acks are answered together.
func (b *Broker) ApplyWrites(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	b.applyWrites(ws, nil, reply)
}

// ApplyWritesHere is ApplyWrites for a session reader with nothing more to
// read: when the partition has nothing to do, its turn runs on the
// reader's goroutine before ApplyWritesHere returns, as a publish's does
// (PublishHere), and reply may be called there.
func (b *Broker) ApplyWritesHere(ws []*messages.ReplicaWrite, reply func([]*messages.ReplicaAck)) {
	here := &dispatch.Here{}
	b.applyWrites(ws, here, reply)
	here.Run()
}

func (b *Broker) applyWrites(ws []*messages.ReplicaWrite, here *dispatch.Here, reply func([]*messages.ReplicaAck)) {
	w := ws[0]
	if b.opening.active.Load() == 0 {
		if pid := b.partitionPID(w.GetTopic(), w.GetPartition()); pid != nil {
			b.system.Root.Send(pid, &topic.ReplicaWritesArrived{Writes: ws, Reply: reply, Here: here})
			return
		}
	}
	g := &gathered{acks: make([]*messages.ReplicaAck, len(ws)), reply: reply}
	g.left.Store(int32(len(ws)))
	for i, w := range ws {
		b.ApplyWrite(w, func(a *messages.ReplicaAck) { g.set(i, a) })
	}
}

// gathered collects the acks of writes applied one by one into the one
// answer their frame gets.
type gathered struct {
	acks  []*messages.ReplicaAck
	left  atomic.Int32
	reply func([]*messages.ReplicaAck)
}

// set records ack i; the last one in answers the frame. Each write's reply
// is called once, and the atomic orders the writes of acks before the read.
func (g *gathered) set(i int, a *messages.ReplicaAck) {
	g.acks[i] = a
	if g.left.Add(-1) == 0 {
		g.reply(g.acks)
	}
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
