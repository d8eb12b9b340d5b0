package broker

import (
	"time"

	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/actors/topic"
)

// Publish sends bodies to a partition of t (-1 picks one) and calls reply once.
//
// A partition led by another node is forwarded to its leader.
func (b *Broker) Publish(t *Topic, partition int, bodies [][]byte, deliverAt int64, reply func(topic.Reply)) {
	b.send(t, partition, bodies, deliverAt, Forwarded{}, nil, reply)
}

// PublishHere is Publish for a caller that would wait next (a connection
// with nothing more to read, a request waiting for its answer): when the
// partition has nothing to do, its turn runs on the caller's goroutine
// before PublishHere returns, and reply may be called there. A client that
// waits for each answer then costs the node one thread's wake-up per
// message, not one per goroutine on the way.
func (b *Broker) PublishHere(t *Topic, partition int, bodies [][]byte, deliverAt int64, reply func(topic.Reply)) {
	b.publishHere(t, partition, bodies, deliverAt, Forwarded{}, reply)
}

// publishHere is PublishHere of a publish another node may have forwarded
// (fwd): that one is never forwarded again, and is not written past its
// deadline.
func (b *Broker) publishHere(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded, reply func(topic.Reply)) {
	here := &dispatch.Here{}
	b.send(t, partition, bodies, deliverAt, fwd, here, reply)
	// Only now, with the topic's lock released: the partition's turn may
	// take locks of its own.
	here.Run()
}

func (b *Broker) send(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded, here *dispatch.Here, reply func(topic.Reply)) {
	t.life.RLock()
	defer t.life.RUnlock()
	if t.deleted {
		reply(topic.Reply{Err: topic.ErrExiting})
		return
	}
	reply, ok := b.admission.admit(len(bodies), reply)
	if !ok {
		return
	}
	p, pid := t.pick(partition)
	if pid != nil && b.refusesWrites(t) {
		// A client's publish naming no partition goes where writes are
		// taken, as if the node led none.
		if q, ok := t.ledElsewhere(); ok && partition < 0 && fwd.By == "" && b.cfg.Assignments != nil && !t.Ephemeral {
			b.forward(t, q, bodies, deliverAt, reply)
			return
		}
		reply(topic.Reply{Err: ErrWritesOff})
		return
	}
	if pid == nil {
		if fwd.By != "" || b.cfg.Assignments == nil || t.Ephemeral || partition >= t.NumPartitions() {
			reply(topic.Reply{Err: topic.ErrNotLeader})
			return
		}
		b.forward(t, partition, bodies, deliverAt, reply)
		return
	}
	if observe := b.cfg.ObservePublish; observe != nil {
		start, inner := time.Now(), reply
		reply = func(r topic.Reply) {
			observe(t.Name, int32(p), time.Since(start))
			inner(r)
		}
	}
	b.system.Root.Send(pid, &topic.Published{Bodies: bodies, DeliverAt: deliverAt, Deadline: fwd.Deadline, SeenEpoch: fwd.SeenEpoch, Reply: reply, Here: here})
}

// PublishTraced publishes bodies with their trace IDs to a partition this
// node leads; it never forwards.
func (b *Broker) PublishTraced(t *Topic, partition int, bodies [][]byte, traces []uint64, reply func(topic.Reply)) {
	b.PublishExt(t, partition, bodies, nil, traces, nil, reply)
}

// PublishExt publishes bodies with their JSON headers (an empty one is
// none), trace IDs and the message IDs the headers name (topic.Dedupe),
// any nil, to a partition this node leads; it never forwards: youzan's
// clients, which send headers, publish to the leader.
func (b *Broker) PublishExt(t *Topic, partition int, bodies, headers [][]byte, traces []uint64, ids []string, reply func(topic.Reply)) {
	t.life.RLock()
	defer t.life.RUnlock()
	if t.deleted {
		reply(topic.Reply{Err: topic.ErrExiting})
		return
	}
	reply, ok := b.admission.admit(len(bodies), reply)
	if !ok {
		return
	}
	_, pid := t.pick(partition)
	if pid == nil {
		reply(topic.Reply{Err: topic.ErrNotLeader})
		return
	}
	if b.refusesWrites(t) {
		reply(topic.Reply{Err: ErrWritesOff})
		return
	}
	b.system.Root.Send(pid, &topic.Published{Bodies: bodies, Headers: headers, Traces: traces, IDs: ids, Reply: reply})
}

// PublishWait publishes and waits for the answer; HTTP uses it, with what
// the request said of its forwarding.
func (b *Broker) PublishWait(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded) topic.Reply {
	done := make(chan topic.Reply, 1)
	b.publishHere(t, partition, bodies, deliverAt, fwd, func(r topic.Reply) { done <- r })
	return <-done
}
