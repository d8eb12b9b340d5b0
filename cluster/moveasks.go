package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/partitamq/partita/messages"
)

// An operator's leader move reaches the controller through etcd:
//
//	<prefix>leadermoves/<topic>/<partition>   LeaderMoveAsked
//
// Any node stores the request; the controller, which alone changes
// leadership, watches the prefix, decides each request, stores the move
// and deletes the request. A request outlives a change of controller, and
// one carried out and seen again changes nothing (planAskedMoves).

// ErrMoveRefused: the controller deleted a request without moving the
// leadership, as the partition changed after the request was checked.
var ErrMoveRefused = errors.New("the controller refused the leader move")

func (a *Assignments) asksPrefix() string { return a.prefix + "leadermoves/" }

func (a *Assignments) askKey(ref PartitionRef) string {
	return a.asksPrefix() + ref.Topic + "/" + strconv.FormatInt(int64(ref.Partition), 10)
}

// AskLeaderMove stores a request for the controller, replacing any earlier
// one of the partition, and returns it with its Revision.
func (a *Assignments) AskLeaderMove(ctx context.Context, ask LeaderMoveAsk) (LeaderMoveAsk, error) {
	if err := validPartition(ask.Ref.Topic, ask.Ref.Partition); err != nil {
		return ask, err
	}
	if ask.From == "" {
		return ask, fmt.Errorf("leader move of %s: no leader to move from", ask.Ref)
	}
	val, err := proto.Marshal(&messages.LeaderMoveAsked{From: ask.From, To: ask.To})
	if err != nil {
		return ask, err
	}
	resp, err := a.cli.Put(ctx, a.askKey(ask.Ref), string(val))
	if err != nil {
		return ask, fmt.Errorf("asking a leader move of %s: %w", ask.Ref, err)
	}
	ask.Revision = resp.Header.Revision
	return ask, nil
}

// DropLeaderMoveAsk deletes the request if it is still the one stored at
// its Revision, and reports whether it did.
func (a *Assignments) DropLeaderMoveAsk(ctx context.Context, ask LeaderMoveAsk) (bool, error) {
	key := a.askKey(ask.Ref)
	resp, err := a.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", ask.Revision)).
		Then(clientv3.OpDelete(key)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("dropping the leader move request of %s: %w", ask.Ref, err)
	}
	return resp.Succeeded, nil
}

// AwaitLeaderMove waits until the controller decided ask and returns the
// partition's state then: with ErrMoveRefused when its leader is still
// ask.From, with ErrLeaderMoved when it moved elsewhere than ask.To. When
// ctx ends first the request is withdrawn, unless the controller took it
// meanwhile, and the state is read as it stands.
func (a *Assignments) AwaitLeaderMove(ctx context.Context, ask LeaderMoveAsk) (PartitionState, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	decided := false
	for resp := range a.cli.Watch(wctx, a.askKey(ask.Ref), clientv3.WithRev(ask.Revision+1)) {
		if resp.Err() != nil {
			break
		}
		for _, ev := range resp.Events {
			decided = decided || ev.Type == mvccpb.DELETE || ev.Kv.ModRevision != ask.Revision
		}
		if decided {
			break
		}
	}
	rctx := ctx
	if !decided {
		var stop context.CancelFunc
		rctx, stop = context.WithTimeout(context.WithoutCancel(ctx), askTimeout)
		defer stop()
		if dropped, err := a.DropLeaderMoveAsk(rctx, ask); err != nil || dropped {
			return PartitionState{}, fmt.Errorf("leader move of %s not carried out in time: %w", ask.Ref, errors.Join(ctx.Err(), err))
		}
	}
	st, ok, err := a.Get(rctx, ask.Ref.Topic, ask.Ref.Partition)
	if err != nil {
		return st, err
	}
	if !ok {
		return st, fmt.Errorf("leader move of %s: %w", ask.Ref, ErrPartitionNotFound)
	}
	return st, moveOutcome(ask, st)
}

// moveOutcome tells what became of ask from the partition's state after the
// controller decided it.
func moveOutcome(ask LeaderMoveAsk, st PartitionState) error {
	switch {
	case st.Leader == ask.From:
		return fmt.Errorf("leader move of %s: %w", ask.Ref, ErrMoveRefused)
	case ask.To != "" && st.Leader != ask.To:
		return fmt.Errorf("leader move of %s: %w: %q leads", ask.Ref, ErrLeaderMoved, st.Leader)
	}
	return nil
}

// WatchLeaderMoves emits every pending request, in no order, first as they are
// now, then after every change. The channel is closed when ctx ends or the
// client is closed.
func (a *Assignments) WatchLeaderMoves(ctx context.Context) <-chan []LeaderMoveAsk {
	out := make(chan []LeaderMoveAsk)
	w := &askWatch{a: a, ctx: ctx, out: out}
	go func() {
		defer close(out)
		followPrefix(ctx, a.cli, a.asksPrefix(), w.reset, w.change)
	}()
	return out
}

// askWatch keeps the pending requests by key.
type askWatch struct {
	a       *Assignments
	ctx     context.Context
	out     chan<- []LeaderMoveAsk
	pending map[string]LeaderMoveAsk
}

func (w *askWatch) reset(kvs []*mvccpb.KeyValue) bool {
	w.pending = make(map[string]LeaderMoveAsk, len(kvs))
	for _, kv := range kvs {
		w.put(kv)
	}
	return w.emit()
}

func (w *askWatch) change(events []*clientv3.Event) bool {
	for _, ev := range events {
		if ev.Type == mvccpb.DELETE {
			delete(w.pending, string(ev.Kv.Key))
		} else {
			w.put(ev.Kv)
		}
	}
	return w.emit()
}

// put keeps a request; one that cannot be read is left for its asker to
// withdraw.
func (w *askWatch) put(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	ask, err := w.a.decodeAsk(kv)
	if err != nil {
		delete(w.pending, key)
		return
	}
	w.pending[key] = ask
}

func (w *askWatch) emit() bool {
	asks := make([]LeaderMoveAsk, 0, len(w.pending))
	for _, ask := range w.pending {
		asks = append(asks, ask)
	}
	select {
	case w.out <- asks:
		return true
	case <-w.ctx.Done():
		return false
	}
}

func (a *Assignments) decodeAsk(kv *mvccpb.KeyValue) (LeaderMoveAsk, error) {
	rest, ok := strings.CutPrefix(string(kv.Key), a.asksPrefix())
	topic, num, ok2 := strings.Cut(rest, "/")
	p, err := strconv.ParseInt(num, 10, 32)
	if !ok || !ok2 || err != nil {
		return LeaderMoveAsk{}, fmt.Errorf("leader move request at %s: not a partition's key", kv.Key)
	}
	var pb messages.LeaderMoveAsked
	if err := proto.Unmarshal(kv.Value, &pb); err != nil {
		return LeaderMoveAsk{}, fmt.Errorf("leader move request at %s: %w", kv.Key, err)
	}
	return LeaderMoveAsk{Ref: PartitionRef{topic, int32(p)}, From: pb.GetFrom(), To: pb.GetTo(), Revision: kv.ModRevision}, nil
}

// ErrFromNotLeader: the move names a source that does not lead the
// partition.
var ErrFromNotLeader = errors.New("the node to move from does not lead the partition")

// MoveLeader asks the controller to hand ref's leadership to the ISR member
// to (its preferred replica or the member leading the fewest partitions
// when to is empty) and waits for the decision. from, when set, must be the
// leader. What the controller would refuse is refused here first, with
// its reason.
func (a *Assignments) MoveLeader(ctx context.Context, ref PartitionRef, from, to string) (PartitionState, error) {
	st, ok, err := a.Get(ctx, ref.Topic, ref.Partition)
	if err != nil {
		return st, err
	}
	if !ok {
		return st, fmt.Errorf("leader move of %s: %w", ref, ErrPartitionNotFound)
	}
	if from != "" && from != st.Leader {
		return st, fmt.Errorf("leader move of %s from %q: %w (%q leads)", ref, from, ErrFromNotLeader, st.Leader)
	}
	nodes, err := Nodes(ctx, a.cli, a.prefix)
	if err != nil {
		return st, err
	}
	live := nodeIDs(nodes)
	target := to
	if target == "" {
		// The controller picks with every partition's leader in view;
		// here it is enough that some member may lead.
		if target = pickLeader(st, live, nil, nil); target == "" {
			return st, fmt.Errorf("leader move of %s: %w", ref, ErrNoTarget)
		}
	}
	if _, err := handOver(st, target, live); err != nil {
		return st, fmt.Errorf("leader move of %s: %w", ref, err)
	}
	ask, err := a.AskLeaderMove(ctx, LeaderMoveAsk{Ref: ref, From: st.Leader, To: to})
	if err != nil {
		return st, err
	}
	return a.AwaitLeaderMove(ctx, ask)
}
