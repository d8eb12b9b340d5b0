package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// NodeInfo is what a live node tells the others about itself.
type NodeInfo struct {
	ID             string
	ClusterAddress string
	TCPAddress     string
	HTTPAddress    string
	Hostname       string
	// Zone is the failure domain the node was started in (--zone), "" for
	// none: placement spreads each partition's replicas over the zones.
	Zone string
	// Leaving marks a node that is stopping (Registration.Leave): the
	// controller moves its leaderships to other ISR members before it goes,
	// as Kafka's controlled shutdown does, and gives it none meanwhile.
	Leaving bool
}

var ErrNodeRegistered = errors.New("node ID is already registered by a live node")

// maxNodeIDLength keeps IDs readable in logs and keys; host:port pairs
// fit many times over.
const maxNodeIDLength = 255

// revokeTimeout bounds the lease revocation of a stopping node; the lease
// expires on its own if etcd cannot be reached.
const revokeTimeout = 5 * time.Second

// Registration is a node's key <prefix>nodes/<id>, attached to a lease kept
// alive for as long as the node runs. The key vanishing is how the rest of
// the cluster learns the node died.
type Registration struct {
	cli       *clientv3.Client
	prefix    string
	info      NodeInfo
	lease     clientv3.LeaseID
	ttl       time.Duration
	stop      context.CancelFunc
	lost      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

func nodesPrefix(prefix string) string { return keyPrefix(prefix) + "nodes/" }

// Register announces info on a lease of ttl, rounded up to whole seconds.
// etcd raises TTLs below its minimum, 1.5 election timeouts rounded up to a
// second (2s with etcd's default 1s election timeout); TTL reports what was
// granted. A live registration of the same ID makes it fail with
// ErrNodeRegistered: after a crash the old key lingers until its lease
// expires. ctx bounds registering only; the lease is kept alive until Close.
func Register(ctx context.Context, cli *clientv3.Client, prefix string, info NodeInfo, ttl time.Duration) (*Registration, error) {
	return RegisterObserved(ctx, cli, prefix, info, ttl, nil)
}

// RegisterObserved is Register that hands renewed the time between two
// renewals of the lease that etcd acknowledged: how close the node came to
// losing it.
func RegisterObserved(ctx context.Context, cli *clientv3.Client, prefix string, info NodeInfo, ttl time.Duration, renewed func(gap time.Duration)) (*Registration, error) {
	if err := validNodeID(info.ID); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, fmt.Errorf("register node %q: lease TTL must be positive, got %s", info.ID, ttl)
	}
	val, err := marshalNode(info)
	if err != nil {
		return nil, fmt.Errorf("register node %q: %w", info.ID, err)
	}
	lease, err := cli.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("register node %q: grant lease: %w", info.ID, err)
	}
	key := nodesPrefix(prefix) + info.ID
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(lease.ID))).
		Else(clientv3.OpGet(key)).
		Commit()
	if err == nil && !resp.Succeeded {
		err = registeredBy(resp.Responses[0].GetResponseRange().GetKvs())
	}
	if err != nil {
		revoke(context.WithoutCancel(ctx), cli, lease.ID)
		return nil, fmt.Errorf("register node %q: %w", info.ID, err)
	}

	kctx, stop := context.WithCancel(context.Background())
	r := &Registration{
		cli:    cli,
		prefix: prefix,
		info:   info,
		lease:  lease.ID,
		ttl:    time.Duration(lease.TTL) * time.Second,
		stop:   stop,
		lost:   make(chan struct{}),
	}
	go r.keepAlive(kctx, renewed)
	return r, nil
}

// registeredBy describes the node holding an ID, from the transaction's
// read of its key.
func registeredBy(kvs []*mvccpb.KeyValue) error {
	if len(kvs) == 0 {
		return ErrNodeRegistered
	}
	holder, err := unmarshalNode(kvs[0].Value)
	if err != nil {
		return ErrNodeRegistered
	}
	return fmt.Errorf("%w (cluster address %q, host %q)", ErrNodeRegistered, holder.ClusterAddress, holder.Hostname)
}

// keepAlive renews the lease until Close, and closes lost when etcd says
// the lease is gone or the client is closed.
func (r *Registration) keepAlive(ctx context.Context, renewed func(time.Duration)) {
	defer close(r.lost)
	renewLease(ctx, r.cli, r.lease, r.ttl, renewed)
}

// renewLease renews a lease renewalsPerTTL times a TTL until ctx ends or
// etcd says the lease is gone, handing renewed the time between two
// renewals etcd acknowledged. A late answer is not a lapsed lease: etcd
// busy applying a backlog, or a disk stalling its fsyncs, renews late what
// it still holds. So the lease counts as lost only when etcd says it is
// gone (or the client is closed), and the renewals go on meanwhile: a node
// renewed late keeps its registration and its partitions instead of
// letting its lease run out while it waits to register again.
func renewLease(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID, ttl time.Duration, renewed func(time.Duration)) {
	tick := time.NewTicker(max(ttl/renewalsPerTTL, 10*time.Millisecond))
	defer tick.Stop()
	// A renewal waits for its answer up to answerWithin TTLs, so an etcd
	// answering later than a TTL still gets to say the lease is gone.
	const answerWithin = 3
	maxInFlight := answerWithin*renewalsPerTTL + 1
	answers := make(chan error, maxInFlight)
	inFlight := 0
	renew := func() {
		inFlight++
		go func() {
			actx, cancel := context.WithTimeout(ctx, answerWithin*ttl)
			defer cancel()
			_, err := cli.KeepAliveOnce(actx, lease)
			answers <- err // never blocks: at most maxInFlight in flight
		}()
	}
	last := time.Now()
	renew()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if inFlight < maxInFlight {
				renew()
			}
		case err := <-answers:
			inFlight--
			switch {
			case err == nil:
				now := time.Now()
				if renewed != nil {
					renewed(now.Sub(last))
				}
				last = now
			case errors.Is(err, rpctypes.ErrLeaseNotFound):
				return
			case cli.Ctx().Err() != nil:
				return // the client is closed: nothing renews the lease any more
			}
			// Any other error (etcd out of reach, no answer within
			// answerWithin TTLs) proves nothing either way: the renewals
			// go on.
		}
	}
}

// renewalsPerTTL is how often a registration renews its lease in one TTL.
// Each renewal is its own request, sent on time whether or not the one
// before was answered, so etcd reading them late — busy, or starved of
// CPU by the load it serves — still renews the lease in time as long as it
// reads one within 5/6 of the TTL of the last. etcd's client KeepAlive
// renews a third of the TTL after its last answer, looking every 500 ms:
// with a 2 s TTL an etcd 0.8 s late let live nodes' leases lapse.
const renewalsPerTTL = 6

// TTL is the lease time etcd granted: how long the node's key outlives the
// node.
func (r *Registration) TTL() time.Duration { return r.ttl }

// Leave marks the registration Leaving, on the same lease, so the mark
// goes with the node. It fails with ErrRegistrationGone when the key is no
// longer this registration's: the lease lapsed, and the node is already
// out of the cluster.
func (r *Registration) Leave(ctx context.Context) error {
	info := r.info
	info.Leaving = true
	val, err := marshalNode(info)
	if err != nil {
		return fmt.Errorf("mark node %q leaving: %w", r.info.ID, err)
	}
	key := nodesPrefix(r.prefix) + r.info.ID
	resp, err := r.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(key), "=", r.lease)).
		Then(clientv3.OpPut(key, string(val), clientv3.WithLease(r.lease))).
		Commit()
	if err != nil {
		return fmt.Errorf("mark node %q leaving: %w", r.info.ID, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("mark node %q leaving: %w", r.info.ID, ErrRegistrationGone)
	}
	return nil
}

// ErrRegistrationGone: the node's key is gone or held on another lease.
var ErrRegistrationGone = errors.New("the registration's key is no longer on its lease")

// Lost is closed once the lease is no longer kept alive: it expired, etcd
// could not be reached for a TTL, the client was closed, or Close was
// called. Other nodes may then consider this one dead.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// Close revokes the lease, removing the node's key at once. It is safe to
// call twice.
func (r *Registration) Close() error {
	r.closeOnce.Do(func() {
		err := revoke(context.Background(), r.cli, r.lease)
		r.stop()
		<-r.lost
		if err != nil {
			r.closeErr = fmt.Errorf("deregister node %q: %w", r.info.ID, err)
		}
	})
	return r.closeErr
}

// revoke treats a lease already gone as revoked: the keys it held are gone
// too.
func revoke(ctx context.Context, cli *clientv3.Client, lease clientv3.LeaseID) error {
	// A closed client would retry for seconds before giving up.
	if err := cli.Ctx().Err(); err != nil {
		return fmt.Errorf("etcd client closed, the lease expires on its own: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, revokeTimeout)
	defer cancel()
	_, err := cli.Revoke(ctx, lease)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return nil
	}
	return err
}

// Nodes returns the registered, live nodes sorted by ID.
func Nodes(ctx context.Context, cli *clientv3.Client, prefix string) ([]NodeInfo, error) {
	resp, err := cli.Get(ctx, nodesPrefix(prefix), clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	nodes := make([]NodeInfo, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		info, err := unmarshalNode(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("decode node info at %s: %w", kv.Key, err)
		}
		nodes = append(nodes, info)
	}
	return nodes, nil
}

// WatchNodes emits the live nodes sorted by ID, first as they are now, then
// after every change to the set. Registrations that cannot be decoded are
// left out. The channel is closed when ctx ends or the client is closed.
func WatchNodes(ctx context.Context, cli *clientv3.Client, prefix string) <-chan []NodeInfo {
	out := make(chan []NodeInfo)
	w := &nodeWatch{ctx: ctx, out: out, prefix: nodesPrefix(prefix)}
	go func() {
		defer close(out)
		followPrefix(ctx, cli, w.prefix, w.reset, w.change)
	}()
	return out
}

// nodeWatch keeps the live set by ID and the last set it emitted, so a
// re-list after a broken watch does not repeat an unchanged set.
type nodeWatch struct {
	ctx     context.Context
	out     chan<- []NodeInfo
	prefix  string
	live    map[string]NodeInfo
	emitted []NodeInfo
	started bool
}

func (w *nodeWatch) reset(kvs []*mvccpb.KeyValue) bool {
	w.live = make(map[string]NodeInfo, len(kvs))
	for _, kv := range kvs {
		w.put(kv)
	}
	return w.emit()
}

func (w *nodeWatch) change(events []*clientv3.Event) bool {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			delete(w.live, strings.TrimPrefix(string(ev.Kv.Key), w.prefix))
		} else {
			w.put(ev.Kv)
		}
	}
	return w.emit()
}

func (w *nodeWatch) put(kv *mvccpb.KeyValue) {
	id := strings.TrimPrefix(string(kv.Key), w.prefix)
	if info, err := unmarshalNode(kv.Value); err == nil {
		w.live[id] = info
	} else {
		delete(w.live, id)
	}
}

func (w *nodeWatch) emit() bool {
	nodes := make([]NodeInfo, 0, len(w.live))
	for _, id := range slices.Sorted(maps.Keys(w.live)) {
		nodes = append(nodes, w.live[id])
	}
	if w.started && slices.Equal(nodes, w.emitted) {
		return true
	}
	select {
	case w.out <- nodes:
		w.started, w.emitted = true, slices.Clone(nodes)
		return true
	case <-w.ctx.Done():
		return false
	}
}

func validNodeID(id string) error {
	if id == "" || len(id) > maxNodeIDLength {
		return fmt.Errorf("invalid node ID %q: must be 1-%d characters", id, maxNodeIDLength)
	}
	for _, c := range id {
		if c == '/' || c <= ' ' || c == 0x7f {
			return fmt.Errorf("invalid node ID %q: no '/', spaces or control characters", id)
		}
	}
	return nil
}
