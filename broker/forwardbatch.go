package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// ForwardsPath is the leader's endpoint for publishes another node
// forwards in batches: every publish waiting for a connection to one
// leader goes in one request, and each answer comes back as its write
// commits. A connection then carries as many publishes as wait, not one
// per round trip to the leader's commit.
const ForwardsPath = "/forwards"

// Forward is one publish of a batch: its partition, the epoch and
// deadline a single forward sends as headers, and its messages.
type Forward struct {
	Topic     string
	Partition int32
	SeenEpoch int64     // 0: none
	Deadline  time.Time // zero: none
	Bodies    [][]byte
}

// Batch sizes: a batch stops taking publishes at either bound, so one
// request holds a leader's connection for a bounded read.
const (
	maxForwardBatch      = 512
	maxForwardBatchBytes = 1 << 20
)

// ErrBadForwards: a batch body that does not decode.
var ErrBadForwards = errors.New("invalid forwards batch")

// EncodeForwards is a batch's body: a count, then per publish its
// topic, partition, epoch, deadline (unix ns) and messages, big-endian.
func EncodeForwards(fs []Forward) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(fs)))
	for _, f := range fs {
		out = binary.BigEndian.AppendUint16(out, uint16(len(f.Topic)))
		out = append(out, f.Topic...)
		out = binary.BigEndian.AppendUint32(out, uint32(f.Partition))
		out = binary.BigEndian.AppendUint64(out, uint64(f.SeenEpoch))
		var at int64
		if !f.Deadline.IsZero() {
			at = f.Deadline.UnixNano()
		}
		out = binary.BigEndian.AppendUint64(out, uint64(at))
		out = binary.BigEndian.AppendUint32(out, uint32(len(f.Bodies)))
		for _, b := range f.Bodies {
			out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
			out = append(out, b...)
		}
	}
	return out
}

// DecodeForwards reads a batch's body; a message longer than maxMsg, a
// publish of none, or a body that ends early or goes on is an error.
func DecodeForwards(body []byte, maxMsg int64) ([]Forward, error) {
	r := forwardReader{b: body}
	n := r.u32()
	if r.err == nil && uint64(n) > uint64(len(body)) {
		r.err = fmt.Errorf("%w: %d publishes in %d bytes", ErrBadForwards, n, len(body))
	}
	var fs []Forward
	for i := uint32(0); i < n && r.err == nil; i++ {
		var f Forward
		f.Topic = string(r.bytes(int(r.u16())))
		f.Partition = int32(r.u32())
		f.SeenEpoch = int64(r.u64())
		if at := int64(r.u64()); at != 0 {
			f.Deadline = time.Unix(0, at)
		}
		count := r.u32()
		if r.err == nil && (count == 0 || uint64(count) > uint64(len(body))) {
			r.err = fmt.Errorf("%w: a publish of %d messages", ErrBadForwards, count)
		}
		for j := uint32(0); j < count && r.err == nil; j++ {
			size := r.u32()
			if int64(size) > maxMsg {
				r.err = fmt.Errorf("%w: a message of %d bytes, more than %d", ErrBadForwards, size, maxMsg)
				break
			}
			f.Bodies = append(f.Bodies, r.bytes(int(size)))
		}
		fs = append(fs, f)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d bytes after the last publish", ErrBadForwards, len(r.b))
	}
	if r.err != nil {
		return nil, r.err
	}
	return fs, nil
}

// forwardReader reads a batch, keeping the first error.
type forwardReader struct {
	b   []byte
	err error
}

func (r *forwardReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n > len(r.b) {
		r.err = fmt.Errorf("%w: ends %d bytes early", ErrBadForwards, n-len(r.b))
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *forwardReader) u16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *forwardReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (r *forwardReader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

// AppendForwardAnswer is one answer of a batch's response: the index
// of the publish in its batch and the code it failed with, without its
// "E_"; "" for written.
func AppendForwardAnswer(out []byte, index int, code string) []byte {
	out = binary.BigEndian.AppendUint32(out, uint32(index))
	out = append(out, byte(len(code)))
	return append(out, code...)
}

// readForwardAnswer reads one answer written by AppendForwardAnswer.
func readForwardAnswer(r *bufio.Reader) (index int, code string, err error) {
	var head [5]byte
	if _, err = io.ReadFull(r, head[:]); err != nil {
		return 0, "", err
	}
	text := make([]byte, head[4])
	if _, err = io.ReadFull(r, text); err != nil {
		return 0, "", err
	}
	return int(binary.BigEndian.Uint32(head[:4])), string(text), nil
}

// forwardQueues holds, per leader, the plain publishes waiting for one
// of its forwardConns connections (forwardSlots). A slot freed while some
// wait is not given back: it carries every publish waiting then, up to a
// batch's bounds, in one request. The lock orders a publish finding no
// free slot and queueing against the last slot's holder finding none
// queued and giving its slot back.
type forwardQueues struct {
	mu      sync.Mutex
	by      map[string][]*queuedForward // HTTP address
	waiting atomic.Int64
}

type queuedForward struct {
	Forward
	ctx, ended context.Context
	done       chan forwardResult // answered once, unless withdrawn
}

type forwardResult struct {
	err  *topic.Error
	sent bool
}

// forwardBatched is forwardPost for a plain publish: alone when a
// connection to the leader is free, else in a batch with the others
// waiting for one.
func (b *Broker) forwardBatched(ctx context.Context, topicName string, p int32, bodies [][]byte) *topic.Error {
	return b.forwardVia(ctx, topicName, p, func(leader cluster.NodeInfo, epoch int64, ended context.Context) (*topic.Error, bool) {
		f := &queuedForward{Forward: Forward{Topic: topicName, Partition: p, SeenEpoch: epoch, Bodies: bodies},
			ctx: ctx, ended: ended, done: make(chan forwardResult, 1)}
		if giveUp, ok := ctx.Deadline(); ok {
			f.Deadline = giveUp.Add(-b.cfg.MaxClockSkew)
		}
		return b.sendOrQueue(leader, f)
	})
}

// sendOrQueue forwards f to leader on a free connection, or queues it
// for the next one freed, and waits for its answer; sent is false when
// no connection carried it (see post). One that gives up once carried in
// a batch is answered as failed, and the leader does not write it past
// its deadline.
func (b *Broker) sendOrQueue(leader cluster.NodeInfo, f *queuedForward) (*topic.Error, bool) {
	if why, ok := b.refusals.standing(leader.HTTPAddress, b.currentView().nodesChanged); ok {
		return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: why}, false
	}
	q := &b.forwards
	addr := leader.HTTPAddress
	q.mu.Lock()
	if b.inFlight.tryTake(addr) {
		q.mu.Unlock()
		defer b.freeSlot(leader)
		v := url.Values{"topic": {f.Topic}, "partition": {fmt.Sprint(f.Partition)}, "binary": {"true"}}
		return b.post(f.ctx, leader, "/mpub", v, binaryBatch(f.Bodies), f.SeenEpoch, f.ended, true)
	}
	if q.by == nil {
		q.by = map[string][]*queuedForward{}
	}
	q.by[addr] = append(q.by[addr], f)
	q.mu.Unlock()
	q.waiting.Add(1)
	defer q.waiting.Add(-1)
	select {
	case r := <-f.done:
		return r.err, r.sent
	case <-f.ctx.Done():
	case <-f.ended.Done():
	}
	if q.withdraw(addr, f) {
		if f.ctx.Err() != nil {
			return errGaveUpWaiting(leader), false
		}
		return errLeaderChangedWaiting(leader), false
	}
	// Carried, or answered as it was taken: the leader's answer stands
	// even when its leadership ended meanwhile.
	select {
	case r := <-f.done:
		return r.err, r.sent
	case <-f.ctx.Done():
		return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarding to the leader: gave up waiting for its answer from " + leader.ID}, true
	}
}

// withdraw takes f out of addr's queue; false when a batch took it.
func (q *forwardQueues) withdraw(addr string, f *queuedForward) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	i := slices.Index(q.by[addr], f)
	if i < 0 {
		return false
	}
	q.by[addr] = slices.Delete(q.by[addr], i, i+1)
	return true
}

// freeSlot ends a forward's hold on a connection to leader: the slot
// goes to the publishes queued for it, if any, else back.
func (b *Broker) freeSlot(leader cluster.NodeInfo) {
	if b.forwards.keep(leader.HTTPAddress, &b.inFlight) {
		go b.sendQueued(leader)
	}
}

// keep reports whether publishes wait for addr; if none do, it gives
// addr's slot back, under the lock that queueing takes.
func (q *forwardQueues) keep(addr string, slots *forwardSlots) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.by[addr]) > 0 {
		return true
	}
	slots.give(addr)
	return false
}

// sendQueued sends the publishes queued for leader in batches, on the
// slot it holds, until none wait.
func (b *Broker) sendQueued(leader cluster.NodeInfo) {
	for {
		batch := b.forwards.take(leader, &b.inFlight)
		if batch == nil {
			return
		}
		b.postForwards(leader, batch)
	}
}

// take takes the next batch queued for leader; nil, and the slot given
// back, when none wait. A publish whose leadership ended or whose client
// gave up meanwhile is answered as not sent.
func (q *forwardQueues) take(leader cluster.NodeInfo, slots *forwardSlots) []*queuedForward {
	q.mu.Lock()
	defer q.mu.Unlock()
	addr := leader.HTTPAddress
	var batch []*queuedForward
	size := 0
	pending := q.by[addr]
	for len(pending) > 0 && len(batch) < maxForwardBatch && size < maxForwardBatchBytes {
		f := pending[0]
		pending = pending[1:]
		if f.ctx.Err() != nil {
			f.done <- forwardResult{err: errGaveUpWaiting(leader)}
			continue
		}
		if f.ended.Err() != nil {
			f.done <- forwardResult{err: errLeaderChangedWaiting(leader)}
			continue
		}
		batch = append(batch, f)
		for _, m := range f.Bodies {
			size += len(m) + 4
		}
	}
	if len(pending) == 0 {
		delete(q.by, addr)
	} else {
		q.by[addr] = pending
	}
	if len(batch) == 0 {
		slots.give(addr)
		return nil
	}
	return batch
}

// postForwards sends a batch to leader and hands each forward its answer.
func (b *Broker) postForwards(leader cluster.NodeInfo, batch []*queuedForward) {
	answerAll := func(r forwardResult) {
		for _, f := range batch {
			if f != nil {
				f.done <- r
			}
		}
	}
	nodes := b.currentView().nodesChanged
	if why, ok := b.refusals.standing(leader.HTTPAddress, nodes); ok {
		answerAll(forwardResult{err: &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: why}})
		return
	}
	// The request lasts as long as its last forward would wait; each
	// forward gives up on its own.
	var latest time.Time
	unbounded := false
	fs := make([]Forward, len(batch))
	for i, f := range batch {
		fs[i] = f.Forward
		d, ok := f.ctx.Deadline()
		unbounded = unbounded || !ok
		if ok && d.After(latest) {
			latest = d
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !unbounded {
		ctx, cancel = context.WithDeadline(context.Background(), latest)
	}
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader.HTTPAddress+ForwardsPath, bytes.NewReader(EncodeForwards(fs)))
	if err != nil {
		answerAll(forwardResult{err: topic.ErrNotLeader})
		return
	}
	req.Header.Set(ForwardedHeader, b.cfg.NodeID)
	resp, connected, err := b.doForward(req, leader.HTTPAddress, nodes)
	if err != nil {
		answerAll(forwardResult{err: &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarding to the leader: " + err.Error()}, sent: connected})
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		answerAll(forwardResult{err: forwardAnswer(resp), sent: true})
		return
	}
	r := bufio.NewReader(resp.Body)
	for left := len(batch); left > 0; left-- {
		i, code, err := readForwardAnswer(r)
		if err == nil && (i < 0 || i >= len(batch) || batch[i] == nil) {
			err = fmt.Errorf("answer for publish %d of %d", i, len(batch))
		}
		if err != nil {
			answerAll(forwardResult{err: &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarding to the leader: reading its answers: " + err.Error()}, sent: true})
			return
		}
		answer := leaderAnswer(code, "")
		batch[i].done <- forwardResult{err: answer, sent: taken(answer)}
		batch[i] = nil
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
}
