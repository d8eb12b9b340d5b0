package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/messages"
)

// openWait bounds reading a topic's placement from etcd when a leader
// writes to it before this node has heard of it.
const openWait = 5 * time.Second

// openings holds the writes that arrived for topics this node is still
// opening. The replication session delivers every partition the two nodes
// share on one goroutine, so a topic being opened must not make it wait:
// its writes queue here, in order, and later writes of the topic queue
// behind them until the topic is open.
type openings struct {
	active atomic.Int32 // topics being opened: zero keeps ApplyWrite lock-free
	mu     sync.Mutex
	queued map[string][]queuedWrite
}

type queuedWrite struct {
	w     *messages.ReplicaWrite
	reply func(*messages.ReplicaAck)
}

// queueBehind queues w if its topic is being opened; false if it is not.
func (o *openings) queueBehind(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck)) bool {
	if o.active.Load() == 0 {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	q, ok := o.queued[w.GetTopic()]
	if ok {
		o.queued[w.GetTopic()] = append(q, queuedWrite{w, reply})
	}
	return ok
}

// openThenApply opens what w needs from etcd in the background (open) and
// then hands it every write of its topic that queued meanwhile, in order.
func (b *Broker) openThenApply(w *messages.ReplicaWrite, reply func(*messages.ReplicaAck), open func(context.Context)) {
	o := &b.opening
	name := w.GetTopic()
	o.mu.Lock()
	if q, ok := o.queued[name]; ok {
		o.queued[name] = append(q, queuedWrite{w, reply})
		o.mu.Unlock()
		return
	}
	if o.queued == nil {
		o.queued = map[string][]queuedWrite{}
	}
	o.queued[name] = []queuedWrite{{w, reply}}
	o.active.Add(1)
	o.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), openWait)
		open(ctx)
		cancel()
		// Held while the queue drains, so a write arriving now waits in
		// queueBehind and cannot overtake the ones queued before it.
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, q := range o.queued[name] {
			b.applyWrite(q.w, q.reply)
		}
		delete(o.queued, name)
		o.active.Add(-1)
	}()
}
