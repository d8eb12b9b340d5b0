package broker

import (
	"context"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
)

// FinishMessage finishes one message of a channel by its ID on partition
// p's leader, whoever holds it: an operator's way past a message no
// consumer can handle, which on an ordered channel holds back the rest.
// Its confirmation is replicated as a consumer's FIN's is.
func (b *Broker) FinishMessage(ctx context.Context, t *Topic, p int, name string, id uint64) error {
	if !t.HasChannel(name) {
		return ErrChannelNotFound
	}
	pid := t.Partition(p)
	if pid == nil {
		return ErrPartitionNotHere
	}
	// The node's view of its leaderships, as a SUB uses: no partition stats
	// gathered to learn one flag.
	if leads, _ := t.leadership(int32(p)); !leads {
		return topic.ErrNotLeader
	}
	res, err := b.system.Root.RequestFuture(pid, &topic.ChannelWanted{Name: name}, 5*time.Second).Result()
	if err != nil {
		return err
	}
	ready, ok := res.(*topic.ChannelReady)
	if !ok || ready.PID == nil {
		return ErrChannelNotFound
	}
	done := make(chan error, 1)
	b.system.Root.Send(ready.PID, &channel.FinishAsked{ID: id, Reply: func(err error) { done <- err }})
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
