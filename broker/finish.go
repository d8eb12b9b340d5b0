package broker

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
)

// FinishMessage finishes one message of a channel by its ID on partition
// p's leader, whoever holds it: an operator's way past a message no
// consumer can handle, which on an ordered channel holds back the rest.
// Its confirmation is replicated as a consumer's FIN's is.
func (b *Broker) FinishMessage(ctx context.Context, t *Topic, p int, name string, id uint64) error {
	pid, err := b.leaderChannel(t, p, name)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	b.system.Root.Send(pid, &channel.FinishAsked{ID: id, Reply: func(err error) { done <- err }})
	return answer(ctx, done)
}

// EmptyDeferred drops the deferred messages of a channel on partition p's
// leader, confirming them (youzan's /channel/emptydelayed), and returns
// how many.
func (b *Broker) EmptyDeferred(ctx context.Context, t *Topic, p int, name string) (int, error) {
	pid, err := b.leaderChannel(t, p, name)
	if err != nil {
		return 0, err
	}
	done := make(chan int, 1)
	b.system.Root.Send(pid, &channel.DeferredEmptyAsked{Reply: func(n int) { done <- n }})
	return answerCount(ctx, done)
}

// DeferredDue makes the deferred messages of a channel due by until due
// now on partition p's leader (youzan's /channel/requeuedelayed), and
// returns how many.
func (b *Broker) DeferredDue(ctx context.Context, t *Topic, p int, name string, until time.Time) (int, error) {
	pid, err := b.leaderChannel(t, p, name)
	if err != nil {
		return 0, err
	}
	done := make(chan int, 1)
	b.system.Root.Send(pid, &channel.DeferredDueAsked{Until: until.UnixNano(), Reply: func(n int) { done <- n }})
	return answerCount(ctx, done)
}

// leaderChannel is the channel's actor on partition p, which this node
// must lead.
func (b *Broker) leaderChannel(t *Topic, p int, name string) (*actor.PID, error) {
	if !t.HasChannel(name) {
		return nil, ErrChannelNotFound
	}
	pid := t.Partition(p)
	if pid == nil {
		return nil, ErrPartitionNotHere
	}
	// The node's view of its leaderships, as a SUB uses: no partition stats
	// gathered to learn one flag.
	if leads, _ := t.leadership(int32(p)); !leads {
		return nil, topic.ErrNotLeader
	}
	res, err := b.system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: name}, 5*time.Second).Result()
	if err != nil {
		return nil, err
	}
	ready, ok := res.(*topic.ChannelReady)
	if !ok || ready.PID == nil {
		return nil, ErrChannelNotFound
	}
	return ready.PID, nil
}

// answer waits for an actor's reply or the end of ctx.
func answer(ctx context.Context, done <-chan error) error {
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answerCount waits for an actor's count or the end of ctx.
func answerCount(ctx context.Context, done <-chan int) (int, error) {
	select {
	case n := <-done:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
