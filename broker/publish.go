package broker

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
	b.route(t, partition, bodies, deliverAt, fwd, here, reply)
}

// route sends an admitted publish to its partition here, or forwards it;
// the caller holds t.life.
func (b *Broker) route(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded, here *dispatch.Here, reply func(topic.Reply)) {
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
		switch {
		case b.cfg.Assignments == nil || t.Ephemeral || partition >= t.NumPartitions():
			reply(topic.Reply{Err: topic.ErrNotLeader})
		case fwd.By != "":
			b.forwardedEarly(t, partition, bodies, deliverAt, fwd, reply)
		default:
			b.forward(t, partition, bodies, deliverAt, reply)
		}
		return
	}
	if fwd.By == "" && b.cfg.Assignments != nil && !t.Ephemeral {
		reply = b.onToNextLeader(t, p, bodies, deliverAt, reply)
	}
	b.sendHere(t, p, pid, bodies, deliverAt, fwd, here, reply)
}

// onToNextLeader wraps the reply to a client's publish sent to partition
// p here: a refusal that wrote nothing because the leadership moved on
// meanwhile (a leader move, or this node deposed) forwards the publish to
// the next leader instead of failing it. The client of a node whose
// leadership a move took then sees latency, not an error. A publish
// another node forwarded is answered, and its forwarder sends it on.
func (b *Broker) onToNextLeader(t *Topic, p int, bodies [][]byte, deliverAt int64, reply func(topic.Reply)) func(topic.Reply) {
	return func(r topic.Reply) {
		if r.Err == nil || !r.Err.Elsewhere {
			reply(r)
			return
		}
		b.sentOn.Add(1)
		b.forward(t, p, bodies, deliverAt, reply)
	}
}

// sendHere hands a publish to partition p's actor on this node.
func (b *Broker) sendHere(t *Topic, p int, pid *actor.PID, bodies [][]byte, deliverAt int64, fwd Forwarded, here *dispatch.Here, reply func(topic.Reply)) {
	if observe := b.cfg.ObservePublish; observe != nil {
		start, inner := time.Now(), reply
		reply = func(r topic.Reply) {
			observe(t.Name, int32(p), time.Since(start))
			inner(r)
		}
	}
	b.system.Root.Send(pid, &topic.Published{Bodies: bodies, DeliverAt: deliverAt, Deadline: fwd.Deadline, SeenEpoch: fwd.SeenEpoch, Reply: reply, Here: here})
}

// forwardedEarly answers a publish forwarded to this node as the
// partition's leader, which its replica does not know it is yet: the
// forwarder's view named it from a state this node's watch has not
// delivered, or has delivered to the view but not yet to the replica. The
// publish waits for the replica to lead, until its deadline; one forwarded
// from a view no newer than this node's, which names another leader, is
// refused at once. A forwarded publish is never forwarded again.
func (b *Broker) forwardedEarly(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded, reply func(topic.Reply)) {
	if partition < 0 {
		reply(topic.Reply{Err: topic.ErrNotLeader})
		return
	}
	b.misdirected.Add(1)
	if !b.currentView().mayLead(partitionKey{t.Name, int32(partition)}, b.cfg.NodeID, fwd.SeenEpoch) {
		reply(topic.Reply{Err: topic.ErrLedElsewhere})
		return
	}
	go func() {
		// A deadline from the forwarder's clock is trusted no further
		// than this node's own forward timeout.
		deadline := time.Now().Add(b.cfg.ForwardTimeout)
		if !fwd.Deadline.IsZero() && fwd.Deadline.Before(deadline) {
			deadline = fwd.Deadline
		}
		parent := fwd.Request
		if parent == nil {
			parent = context.Background()
		}
		ctx, cancel := context.WithDeadline(parent, deadline)
		defer cancel()
		if !b.awaitLead(ctx, t, partition, fwd.SeenEpoch) {
			reply(topic.Reply{Err: topic.ErrLedElsewhere, Settling: true})
			return
		}
		b.publishLocal(t, partition, bodies, deliverAt, fwd, settling(reply))
	}()
}

// settling marks answers as settling: a publish that waited for a
// leadership tells admission nothing of the node's queue.
func settling(reply func(topic.Reply)) func(topic.Reply) {
	return func(r topic.Reply) {
		r.Settling = true
		reply(r)
	}
}

// publishLocal is route for a publish that waited for this node to lead
// partition: it is written here or refused, never forwarded (again), so
// the waits of one publish add up to one forward timeout at most. The
// topic may have gone meanwhile.
func (b *Broker) publishLocal(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded, reply func(topic.Reply)) {
	t.life.RLock()
	defer t.life.RUnlock()
	if t.deleted {
		reply(topic.Reply{Err: topic.ErrExiting})
		return
	}
	p, pid := t.pick(partition)
	switch {
	case pid == nil:
		reply(topic.Reply{Err: topic.ErrLedElsewhere})
	case b.refusesWrites(t):
		reply(topic.Reply{Err: ErrWritesOff})
	default:
		b.sendHere(t, p, pid, bodies, deliverAt, fwd, nil, reply)
	}
}

// awaitLead waits until this node's replica of partition p leads, while
// the view says it may soon (clusterView.mayLead), until ctx ends; it
// reports whether it leads.
func (b *Broker) awaitLead(ctx context.Context, t *Topic, p int, seenEpoch int64) bool {
	b.forwardsWaiting.Add(1)
	defer b.forwardsWaiting.Add(-1)
	for {
		s := t.slot(p)
		if s == nil {
			return false
		}
		changed := s.changes()
		if s.leads.Load() && s.pid.Load() != nil {
			return true
		}
		v, key := b.currentView(), partitionKey{t.Name, int32(p)}
		if !v.mayLead(key, b.cfg.NodeID, seenEpoch) {
			return false
		}
		var moved <-chan struct{}
		if l, known := v.leadership(key); known {
			moved = l.ended.Done()
		}
		select {
		case <-changed:
		case <-moved:
		case <-ctx.Done():
			return false
		}
	}
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

// PublishForwarded is PublishHere of a publish another node forwarded
// (fwd): it is never forwarded again, and not written past its deadline.
func (b *Broker) PublishForwarded(t *Topic, partition int, bodies [][]byte, fwd Forwarded, reply func(topic.Reply)) {
	b.publishHere(t, partition, bodies, 0, fwd, reply)
}

// PublishWait publishes and waits for the answer; HTTP uses it, with what
// the request said of its forwarding.
func (b *Broker) PublishWait(t *Topic, partition int, bodies [][]byte, deliverAt int64, fwd Forwarded) topic.Reply {
	done := make(chan topic.Reply, 1)
	b.publishHere(t, partition, bodies, deliverAt, fwd, func(r topic.Reply) { done <- r })
	return <-done
}
