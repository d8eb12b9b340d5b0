package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
)

// ForwardedHeader marks a publish one node sent another on a client's
// behalf; the receiving node never forwards it again, so a leadership
// change in flight cannot bounce a publish around.
const ForwardedHeader = "X-Partita-Forwarded"

// DeadlineHeader carries a forwarded publish's deadline: unix nanoseconds
// on the forwarder's clock, from which on the leader must not write it
// (topic.Publish.Deadline). An absolute time rather than a remaining
// duration, because the request may sit in socket buffers for as long as a
// network partition lasts, and a duration would start counting only when
// it is read.
const DeadlineHeader = "X-Partita-Deadline"

// EpochHeader carries the partition's EpochForWrite in the forwarder's
// view when it chose the leader. The deadline alone leaves a gap: a
// forward fails at once when the view names a new leader, so its client
// publishes again elsewhere; should the old leader lead again before the
// deadline and only then read the request, the epoch tells it the forward
// was meant for its earlier leadership, and it refuses
// (topic.Publish.SeenEpoch).
const EpochHeader = "X-Partita-Epoch"

// Forward timing (docs/faults.md, finding 12). A forward gives up, and
// its client hears the publish failed, ForwardTimeout after it began; the
// deadline it hands the leader is MaxClockSkew earlier. With the two
// clocks less than MaxClockSkew apart, the leader's clock passes the
// deadline before the forwarder's reaches its give-up: a publish that has
// not taken its place in the leader's log by then never will, so it cannot
// land behind publishes the client makes after hearing it failed.
// etcd warns of peer clocks more than a second apart; the default margin
// is that second.
//
// The leader never learns when the client itself gives up, so the forward
// must give up first: a client that times out before it, and publishes its
// next message elsewhere, leaves a forward whose deadline may still be
// ahead when a partition heals. Five seconds is within the publish
// timeouts clients commonly use (the fault suite's producer waits 5 s) and
// the leader's own --write-timeout.
//
// DefaultForwardMoveGrace is how long a forward in flight to a leader
// whose leadership moved while it stayed registered (a planned move)
// waits for its answer: the former leader answers within a watch
// delivery, and sends on what it never wrote.
const (
	DefaultForwardTimeout   = 5 * time.Second
	DefaultMaxClockSkew     = time.Second
	DefaultForwardMoveGrace = time.Second
)

// Forwarded is what a node forwarding a publish said of it; the zero value
// is a client's own publish.
type Forwarded struct {
	By       string    // the forwarding node; "" when not forwarded
	Deadline time.Time // when the publish stops being written; zero for never
	// SeenEpoch is the epoch of the partition state the forwarder chose
	// the leader from; 0 for none.
	SeenEpoch int64
	// Request, when set, is the forwarded request's context, which ends
	// once the forwarder gave up on it (its connection closed): a publish
	// waiting for this node to lead is then refused, not written behind
	// the client's back.
	Request context.Context
}

var (
	// ErrBadDeadline: a DeadlineHeader that is not a positive count of
	// unix nanoseconds.
	ErrBadDeadline = errors.New("invalid forward deadline")
	// ErrBadEpoch: an EpochHeader that is not a positive number.
	ErrBadEpoch = errors.New("invalid forward epoch")
)

// ForwardedBy reads what a request's headers say of its forwarding. A
// request without them is a client's: no deadline, as before deadlines
// existed, which is also what a node without them sends.
func ForwardedBy(h http.Header) (Forwarded, error) {
	f := Forwarded{By: h.Get(ForwardedHeader)}
	if v := h.Get(DeadlineHeader); v != "" {
		ns, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ns <= 0 {
			return Forwarded{}, fmt.Errorf("%w: %q", ErrBadDeadline, v)
		}
		f.Deadline = time.Unix(0, ns)
	}
	if v := h.Get(EpochHeader); v != "" {
		e, err := strconv.ParseInt(v, 10, 64)
		if err != nil || e <= 0 {
			return Forwarded{}, fmt.Errorf("%w: %q", ErrBadEpoch, v)
		}
		f.SeenEpoch = e
	}
	return f, nil
}

// forwardConns bounds the connections to one leader. A client that
// pipelines thousands of publishes to partitions led elsewhere starts a
// forward for each at once; unbounded, each would take a socket on both
// nodes, and thousands of them run a node out of file descriptors, which
// its partitions' files need. Forwards beyond the bound wait for a
// connection.
//
// The bound is on the sockets this node holds. The leader lets go of its
// end of a connection this node closed only once it reads the close,
// which may be after the replacement arrived: for that moment the
// leader's count of connections from this node can pass the bound.
const forwardConns = 64

// sharedForwardClient keeps connections to the other nodes open: with Go's
// default of two idle connections per host, concurrent forwards dial a new
// connection for nearly every publish and leave sockets in TIME_WAIT. Each
// forward's context bounds it, so the leader's deadline and the give-up
// come from one clock reading.
//
// A forward given up on closes its connection (the transport cannot reuse
// one with a request half done) but is not reset hard: a reset would not
// take back bytes already in the leader's socket buffer, and under a
// partition it is lost anyway. The deadline is what makes a late arrival
// harmless.
var sharedForwardClient = newForwardClient((&net.Dialer{}).DialContext)

// newForwardClient is a forwarding client whose connections dial opens.
//
// MaxConnsPerHost alone does not hold the bound: the transport gives a
// closing connection's place to a waiting forward before it closes the
// socket, and the forward dials at once, so each connection closing while
// forwards wait (one whose answer came before its writer reported the
// request written, one given up on, one the leader closed) briefly adds a
// socket. The dialer's slots are freed only once a socket is closed.
func newForwardClient(dial dialFunc) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&boundedDialer{dial: dial, most: forwardConns}).DialContext,
			MaxConnsPerHost:     forwardConns,
			MaxIdleConnsPerHost: forwardConns,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

// forwardClient is the client b forwards with: the shared one, unless a
// test gave b its own.
func (b *Broker) forwardClient() *http.Client {
	if b.forwarder != nil {
		return b.forwarder
	}
	return sharedForwardClient
}

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// boundedDialer holds at most most sockets open to each address at once:
// a dial takes a slot before it begins, and the connection gives it back
// when its Close has returned.
type boundedDialer struct {
	dial dialFunc
	most int

	mu    sync.Mutex
	hosts map[string]*dialSlots
}

// dialSlots are one address's slots; users counts the dials waiting or
// holding one, so an address no longer dialed is forgotten.
type dialSlots struct {
	held  chan struct{}
	users int
}

func (d *boundedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	if d.hosts == nil {
		d.hosts = map[string]*dialSlots{}
	}
	s := d.hosts[addr]
	if s == nil {
		s = &dialSlots{held: make(chan struct{}, d.most)}
		d.hosts[addr] = s
	}
	s.users++
	d.mu.Unlock()
	select {
	case s.held <- struct{}{}:
	case <-ctx.Done():
		d.leave(addr, s, false)
		return nil, ctx.Err()
	}
	c, err := d.dial(ctx, network, addr)
	if err != nil {
		d.leave(addr, s, true)
		return nil, err
	}
	return &slotConn{Conn: c, leave: func() { d.leave(addr, s, true) }}, nil
}

func (d *boundedDialer) leave(addr string, s *dialSlots, held bool) {
	if held {
		<-s.held
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.users--; s.users == 0 {
		delete(d.hosts, addr)
	}
}

// slotConn gives its slot back once, after its socket is closed.
type slotConn struct {
	net.Conn
	once  sync.Once
	leave func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.leave)
	return err
}

// forward publishes to the partition's leader on another node, over its
// HTTP API, and answers the client with the leader's answer. It runs off the
// caller's goroutine.
//
// The answer is settling to this node's admission: the forward holds a
// place in its limit while it lasts, but how long it took is the leader's
// queue, which the leader's own admission bounds. Read as this node's, a
// leader slow after a failover would cut the limit of a forwarder with
// nothing queued, and refuse its own partitions' publishes too.
func (b *Broker) forward(t *Topic, partition int, bodies [][]byte, deliverAt int64, reply func(topic.Reply)) {
	if partition < 0 {
		partition = b.pickForward(t)
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ForwardTimeout)
		defer cancel()
		err := b.forwardTo(ctx, t.Name, int32(partition), bodies, deliverAt)
		if err != errLeadsHere {
			reply(topic.Reply{Err: err, Settling: true})
			return
		}
		// The view names this node, and its replica hears so in a moment.
		// The write keeps the forward's deadline: its client may give up
		// when the forward would have.
		if !b.awaitLead(ctx, t, partition, 0) {
			reply(topic.Reply{Err: topic.ErrNotLeader, Settling: true})
			return
		}
		giveUp, _ := ctx.Deadline()
		b.publishLocal(t, partition, bodies, deliverAt, Forwarded{Deadline: giveUp.Add(-b.cfg.MaxClockSkew)}, settling(reply))
	}()
}

// pickForward picks, round robin, a partition for a publish that named
// none, among those whose leader the view says this node can reach: a
// partition being failed over would hold the publish until its election.
// With none reachable it picks any.
func (b *Broker) pickForward(t *Topic) int {
	n := t.NumPartitions()
	start := int(t.rr.Add(1) % uint64(n))
	v := b.currentView()
	for i := range n {
		p := (start + i) % n
		if l, _ := v.leadership(partitionKey{t.Name, int32(p)}); l != nil && l.node != b.cfg.NodeID {
			if _, ok := v.node(l.node); ok {
				return p
			}
		}
	}
	return start
}

func (b *Broker) forwardTo(ctx context.Context, topicName string, p int32, bodies [][]byte, deliverAt int64) *topic.Error {
	q := url.Values{"topic": {topicName}, "partition": {fmt.Sprint(p)}}
	var body []byte
	path := "/mpub"
	if deliverAt > 0 {
		path, body = "/pub", bodies[0]
		q.Set("defer", fmt.Sprint(max(time.Until(time.Unix(0, deliverAt)).Milliseconds(), 0)))
	} else {
		return b.forwardBatched(ctx, topicName, p, bodies)
	}
	return b.forwardPost(ctx, topicName, p, path, q, body)
}

// forwardExt publishes one message with its JSON header to the
// partition's leader on another node, through its /pub_ext. The header is
// escaped twice: /pub_ext unescapes ?ext= once more, as youzan's does.
func (b *Broker) forwardExt(ctx context.Context, topicName string, p int32, body, header []byte) *topic.Error {
	q := url.Values{"topic": {topicName}, "partition": {fmt.Sprint(p)}, "ext": {url.QueryEscape(string(header))}}
	return b.forwardPost(ctx, topicName, p, "/pub_ext", q, body)
}

// errLeadsHere: the view names this node the partition's leader, so
// there is no one to forward to; its replica is told a moment later
// (Broker.forward publishes here then).
var errLeadsHere = &topic.Error{Code: topic.ErrNotLeader.Code, Text: topic.ErrNotLeader.Text}

// forwardPost POSTs a publish to path on the partition's leader and
// reads its answer. A publish no connection carried to the leader (its
// port refused or reset the dial: it died, or its process is going, and
// its partitions fail over; or its leadership ended while the publish
// waited for a connection) was never seen there, so the forward waits for
// the view to name another leader and goes there, within ctx.
func (b *Broker) forwardPost(ctx context.Context, topicName string, p int32, path string, q url.Values, body []byte) *topic.Error {
	return b.forwardVia(ctx, topicName, p, func(leader cluster.NodeInfo, epoch int64, ended context.Context) (*topic.Error, bool) {
		return b.post(ctx, leader, path, q, body, epoch, ended, false)
	})
}

// forwardVia sends a publish to partition p's leader with send, and again
// to the next leader while no connection carried it or the leader refused
// it as led elsewhere, writing nothing (sent false).
func (b *Broker) forwardVia(ctx context.Context, topicName string, p int32, send func(leader cluster.NodeInfo, epoch int64, ended context.Context) (answer *topic.Error, sent bool)) *topic.Error {
	for {
		leader, epoch, ended, here, ok := b.leaderNode(ctx, topicName, p, true)
		if here {
			return errLeadsHere
		}
		if !ok {
			return topic.ErrNotLeader
		}
		answer, sent := send(leader, epoch, ended)
		if sent || ended.Done() == nil || !b.waitForView(ctx, ended.Done(), b.currentView().nodesChanged) {
			return answer
		}
		if !taken(answer) {
			b.sentOn.Add(1)
		}
	}
}

// post forwards one publish to leader and reads its answer; sent is false
// when no connection carried the request, so the leader never saw the
// publish: the leader's host refused or reset the dial, or the request was
// still waiting for one of the pool's connections when its leadership
// ended. The request ends once ended does. With held, the caller holds
// a connection slot to leader already (sendOrQueue found one free).
func (b *Broker) post(ctx context.Context, leader cluster.NodeInfo, path string, q url.Values, body []byte, epoch int64, ended context.Context, held bool) (answer *topic.Error, sent bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer b.endWithLeadership(ctx, ended, leader, cancel)()
	// The transport takes a connection before it writes a byte: a request
	// that failed without one was never written, and its publish may go
	// to the partition's next leader. A killed leader's pool has forwards
	// queued for its connections; they would otherwise fail once the
	// successor is elected, and their clients publish again.
	req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+leader.HTTPAddress+path+"?"+q.Encode(), bytes.NewReader(body))
	if rerr != nil {
		return topic.ErrNotLeader, true
	}
	req.Header.Set(ForwardedHeader, b.cfg.NodeID)
	if epoch > 0 {
		req.Header.Set(EpochHeader, strconv.FormatInt(epoch, 10))
	}
	if giveUp, ok := ctx.Deadline(); ok {
		req.Header.Set(DeadlineHeader, strconv.FormatInt(giveUp.Add(-b.cfg.MaxClockSkew).UnixNano(), 10))
	}
	// A refusal of the leader's port under the current nodes stands for
	// the forwards after it (refusalStands). Forwards that waited for a
	// slot while the port began to refuse look again once they hold one,
	// or after a kill each would dial it in turn: thousands of refused
	// dials, each a socket, as the takeover needs the cores.
	var nodes chan struct{}
	refusedNow := func() *topic.Error {
		nodes = b.currentView().nodesChanged
		if why, ok := b.refusals.standing(leader.HTTPAddress, nodes); ok {
			return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: why}
		}
		return nil
	}
	if err := refusedNow(); err != nil {
		return err, false
	}
	if !held {
		ok := b.inFlight.take(ctx, ended, leader.HTTPAddress)
		if ok && ended.Err() != nil {
			b.freeSlot(leader)
			ok = false
		}
		if !ok && ctx.Err() != nil && ended.Err() == nil {
			return errGaveUpWaiting(leader), false
		}
		if !ok {
			return errLeaderChangedWaiting(leader), false
		}
		defer b.freeSlot(leader)
	}
	if err := refusedNow(); err != nil {
		return err, false
	}
	resp, connected, derr := b.doForward(req, leader.HTTPAddress, nodes)
	if derr != nil && ended.Err() != nil {
		return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "the partition's leader changed while forwarding to " + leader.ID}, connected
	}
	if derr != nil {
		return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarding to the leader: " + derr.Error()}, connected
	}
	answer = forwardAnswer(resp)
	return answer, taken(answer)
}

// endWithLeadership cancels a forward in flight to leader once its
// leadership ended: at once when the leader is gone from the live nodes
// (it died or froze, and failover elected another), else once it leaves
// them or the move grace passes. A leader moved in a planned move answers
// within a watch delivery, and the publishes it refuses as never written
// go on to the next leader, where cancelled they would fail. ctx is the
// forward's own; stop ends the watch.
func (b *Broker) endWithLeadership(ctx, ended context.Context, leader cluster.NodeInfo, cancel func()) (stop func() bool) {
	if b.cfg.ForwardMoveGrace <= 0 {
		return context.AfterFunc(ended, cancel)
	}
	return context.AfterFunc(ended, func() {
		grace := time.NewTimer(b.cfg.ForwardMoveGrace)
		defer grace.Stop()
		for {
			v := b.currentView()
			if _, live := v.node(leader.ID); !live {
				cancel()
				return
			}
			select {
			case <-grace.C:
				cancel()
				return
			case <-v.nodesChanged:
			case <-ctx.Done():
				return
			}
		}
	})
}

// doForward sends a forward's request, single or batch, to the leader at
// addr. connected reports whether a connection carried it: a request
// that failed without one was never written, and its publishes may go
// to the partition's next leader. A refused dial is noted to stand, under
// the view whose nodesChanged is nodes, for the forwards after it.
func (b *Broker) doForward(req *http.Request, addr string, nodes chan struct{}) (resp *http.Response, connected bool, err error) {
	var got atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { got.Store(true) }}))
	resp, err = b.forwardClient().Do(req)
	if err != nil && refused(err) {
		b.refusals.note(addr, nodes, err)
	}
	return resp, got.Load(), err
}

// errGaveUpWaiting and errLeaderChangedWaiting answer a forward no
// connection to leader carried: its client gave up, or its leadership
// ended, while it waited for one.
func errGaveUpWaiting(leader cluster.NodeInfo) *topic.Error {
	return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "forwarding to the leader: gave up waiting for a connection to " + leader.ID}
}

func errLeaderChangedWaiting(leader cluster.NodeInfo) *topic.Error {
	return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "the partition's leader changed while waiting for a connection to " + leader.ID}
}

// forwardSlots bounds the forwards under way to each leader at
// forwardConns, the connections its pool holds. A forward waits for its
// slot here rather than in the transport's queue, where it could be handed
// a connection freed by another forward in the same instant its
// leadership ended, and so count as seen by the former leader: one that
// finds the leadership ended once it holds a slot was carried by no
// connection, and goes to the next leader.
type forwardSlots struct {
	mu      sync.Mutex
	by      map[string]chan struct{} // HTTP address
	waiting atomic.Int64             // forwards waiting for a slot
}

// slots is addr's semaphore.
func (f *forwardSlots) slots(addr string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]chan struct{}{}
	}
	slots := f.by[addr]
	if slots == nil {
		slots = make(chan struct{}, forwardConns)
		f.by[addr] = slots
	}
	return slots
}

// tryTake takes a slot to addr if one is free.
func (f *forwardSlots) tryTake(addr string) bool {
	select {
	case f.slots(addr) <- struct{}{}:
		return true
	default:
		return false
	}
}

// give frees a slot to addr; Broker.freeSlot decides when.
func (f *forwardSlots) give(addr string) { <-f.slots(addr) }

// take waits for a slot to addr until ctx or ended is done; ok is false
// when it got none. The slot is freed with Broker.freeSlot, which hands
// it to the publishes queued meanwhile.
func (f *forwardSlots) take(ctx, ended context.Context, addr string) (ok bool) {
	slots := f.slots(addr)
	select {
	case slots <- struct{}{}:
	default:
		f.waiting.Add(1)
		defer f.waiting.Add(-1)
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return false
		case <-ended.Done():
			return false
		}
	}
	return true
}

// refusalStands is how long a leader's port that refused a forward's
// connection is taken as refusing, while the cluster's nodes stay as they
// were: a killed leader's port refuses every forward to its partitions
// until their successors are elected, thousands in the first second, each
// a socket and a dial of its own otherwise.
var refusalStands = 100 * time.Millisecond

// refusals remembers the leaders' ports that refused a connection.
type refusals struct {
	mu sync.Mutex
	by map[string]refusal // HTTP address
}

// refusal keeps the text a forward it stands for is refused with, made
// once: a url.Error formats its URL each time it is asked, and a killed
// leader's port stands refused for thousands of forwards.
type refusal struct {
	at    time.Time
	nodes chan struct{} // the view's nodesChanged when it came
	text  string
}

// note records addr's refusal, under the view whose nodesChanged is nodes.
func (r *refusals) note(addr string, nodes chan struct{}, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]refusal{}
	}
	r.by[addr] = refusal{at: time.Now(), nodes: nodes, text: "forwarding to the leader: " + err.Error()}
}

// standing is the text of addr's refusal when it came less than
// refusalStands ago and the nodes have not changed since (nodes is the
// current view's nodesChanged): a node registering again may listen
// again. ok is false otherwise.
func (r *refusals) standing(addr string, nodes chan struct{}) (text string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.by[addr]
	if !ok {
		return "", false
	}
	if f.nodes != nodes || time.Since(f.at) >= refusalStands {
		delete(r.by, addr)
		return "", false
	}
	return f.text, true
}

// refused reports whether err is a connection the leader's host refused:
// the request was never sent.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial" && errors.Is(err, syscall.ECONNREFUSED)
}

// forwardAnswer reads the leader's answer to a forward.
func forwardAnswer(resp *http.Response) *topic.Error {
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		// Read to the end so the connection goes back to the pool.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil
	}
	var doc struct {
		Message string `json:"message"`
	}
	json.NewDecoder(resp.Body).Decode(&doc)
	return leaderAnswer(doc.Message, resp.Status)
}

// ElsewhereCode is a leader's answer to a forward it refused, writing
// nothing, because it does not lead the partition (or no longer does):
// the forwarder sends the publish on to the next leader its view names.
// A client of the leader itself hears E_FAILED_ON_NOT_LEADER.
const ElsewhereCode = "NOT_LEADER_UNWRITTEN"

// errElsewhere is ElsewhereCode as its forwarder holds it: what the
// client hears if no next leader is named before the forward gives up.
var errElsewhere = &topic.Error{Code: topic.ErrNotLeader.Code, Text: "at the leader", Elsewhere: true}

// taken reports whether a leader's answer to a forward leaves the
// publish where it went: written, failed, or maybe either. Only a
// refusal that wrote nothing, the leadership having moved, may go on
// to the next leader.
func taken(answer *topic.Error) bool { return answer == nil || !answer.Elsewhere }

// leaderAnswer is the error a client hears for the leader's answer to a
// forward, its code without "E_" ("" for written); status, when set, is
// the HTTP status it came with.
func leaderAnswer(code, status string) *topic.Error {
	switch code {
	case "":
		if status == "" {
			return nil
		}
	case ElsewhereCode:
		return errElsewhere
	case "FAILED_ON_NOT_LEADER", "FAILED_ON_NOT_WRITABLE", "PUB_TOO_MUCH_WAITING":
		return &topic.Error{Code: "E_" + code, Text: "at the leader"}
	}
	if status != "" {
		code = status + " " + code
	}
	return &topic.Error{Code: "E_FAILED_ON_NOT_WRITABLE", Text: "leader answered " + code}
}

// binaryBatch is the body of a binary /mpub: a count, then each message
// with its size.
func binaryBatch(bodies [][]byte) []byte {
	out := binary.BigEndian.AppendUint32(nil, uint32(len(bodies)))
	for _, b := range bodies {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out
}

// leaderNode is the registration of a partition's leader, from the cluster
// view, or from etcd when the watches have not named the partition yet,
// with the epoch of the state that named it; ended ends when another node
// leads.
//
// With wait, a view that names no leader (an election is on) or a leader
// whose registration it does not hold yet is waited out until ctx ends: a
// failover then shows to a forwarded publish as latency rather than an
// error, and a node that has just registered is reached although the node
// watch delivers its registration a moment after the partition watch named
// it leader (etcd hands a watcher that starts behind its backlog in rounds
// 100 ms apart). Each wait is for the partition's own leadership or the set
// of live nodes to change, so a failover's thousands of elections do not
// wake every waiting forward.
func (b *Broker) leaderNode(ctx context.Context, topicName string, p int32, wait bool) (n cluster.NodeInfo, epoch int64, ended context.Context, here, ok bool) {
	key := partitionKey{topicName, p}
	for {
		v := b.currentView()
		n, epoch, ended, here, ok := b.leaderIn(ctx, v, key)
		if ok || here || ended == nil || !wait {
			return n, epoch, ended, here, ok
		}
		if ended.Done() == nil && v.nodesChanged == nil {
			return cluster.NodeInfo{}, 0, nil, false, false // nothing would wake the wait
		}
		if !b.waitForView(ctx, ended.Done(), v.nodesChanged) {
			return cluster.NodeInfo{}, 0, nil, false, false
		}
	}
}

// waitForView waits for leadership or nodes to close, counted in
// partita_forwards_waiting_for_leader; false when ctx ended first.
func (b *Broker) waitForView(ctx context.Context, leadership <-chan struct{}, nodes chan struct{}) bool {
	b.forwardsWaiting.Add(1)
	defer b.forwardsWaiting.Add(-1)
	select {
	case <-leadership:
	case <-nodes:
	case <-ctx.Done():
		return false
	}
	return true
}

// leaderIn is leaderNode's answer from one view. here says the view
// names this node. Without an answer, ended (if not nil) is what a wait
// for one watches, besides the view's live nodes: the partition's
// leadership in the view, or none (context.Background) for a partition
// the view does not hold yet.
func (b *Broker) leaderIn(ctx context.Context, v *clusterView, key partitionKey) (n cluster.NodeInfo, epoch int64, ended context.Context, here, ok bool) {
	var leader string
	if l, known := v.leadership(key); known {
		leader, epoch, ended = l.node, v.epoch(key), l.ended
	} else {
		// Only a partition created since the watch last delivered gets
		// here. Its forward has no leadership to end with, so it waits out
		// its timeout if this leader stops answering.
		st, found, err := b.cfg.Assignments.Get(ctx, key.topic, key.partition)
		if err != nil || !found || st.Leader == "" {
			// Nothing in the view would wake a wait for a partition it
			// does not hold without a leader.
			return cluster.NodeInfo{}, 0, nil, false, false
		}
		leader, epoch, ended = st.Leader, st.EpochForWrite, context.Background()
	}
	switch leader {
	case b.cfg.NodeID:
		return cluster.NodeInfo{}, 0, ended, true, false
	case "":
		return cluster.NodeInfo{}, 0, ended, false, false
	}
	// A leader missing from the live nodes the view holds is gone (a
	// failover is electing its successor) or has only just registered.
	// Asking etcd again for every publish to its partitions, thousands a
	// second through a failover, would load etcd just as it stores the
	// elections and renews the survivors' leases: the forward waits for the
	// view instead. Only a view that has not heard from the node watch yet
	// asks.
	if n, ok = v.node(leader); !ok && v.nodes == nil {
		nodes, err := cluster.Nodes(ctx, b.cfg.Etcd, b.cfg.MetaPrefix)
		if err != nil {
			return cluster.NodeInfo{}, 0, nil, false, false
		}
		for _, x := range nodes {
			if x.ID == leader {
				n, ok = x, true
			}
		}
	}
	if !ok || n.HTTPAddress == "" {
		return cluster.NodeInfo{}, 0, ended, false, false
	}
	return n, epoch, ended, false, true
}

// LeaderHTTP is the HTTP address of partition p's leader when another
// node leads it, for an operator's call this node passes on.
func (b *Broker) LeaderHTTP(ctx context.Context, topicName string, p int) (string, bool) {
	if b.cfg.Assignments == nil {
		return "", false
	}
	n, _, _, _, ok := b.leaderNode(ctx, topicName, int32(p), false)
	return n.HTTPAddress, ok
}
