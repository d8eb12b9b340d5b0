package broker

import (
	"context"
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

// ErrPartitionNotHere: this node holds no replica of the partition.
var ErrPartitionNotHere = errors.New("partition not on this node")

// FoundMessage is a message /message/get found, with where it stands in
// each channel of its partition on this node.
type FoundMessage struct {
	Message  storage.Located
	Leader   bool
	Channels []channel.MessageState // sorted by channel
}

// FindMessage locates one committed message of partition p and asks every
// channel where it stands.
func (b *Broker) FindMessage(t *Topic, p int, mode storage.SearchMode, pos int64) (*FoundMessage, error) {
	if t.Partition(p) == nil {
		return nil, ErrPartitionNotHere
	}
	res, err := b.system.Root.RequestFuture(t.Partition(p), &topic.MessageWanted{Mode: mode, Pos: pos}, 10*time.Second).Result()
	if err != nil {
		return nil, err
	}
	f := res.(*topic.MessageFound)
	if f.Err != nil {
		return nil, f.Err
	}
	out := &FoundMessage{Message: f.Message, Leader: f.Leader}
	q := &channel.MessageStateRequested{Offset: f.Message.Offset, ID: f.Message.ID, DelayedChannel: f.Message.DelayedChannel}
	for _, pid := range f.ChannelActors {
		st, err := b.system.Root.RequestFuture(pid, q, 5*time.Second).Result()
		if err == nil {
			out.Channels = append(out.Channels, *st.(*channel.MessageState))
		}
	}
	sort.Slice(out.Channels, func(i, j int) bool { return out.Channels[i].Channel < out.Channels[j].Channel })
	return out, nil
}

// StartPosition is where /channel/setoffset or SUB_ADVANCED puts a channel:
// youzan's "timestamp:<sec>", "msgcount:<n>", "virtual_queue:<bytes>" or
// "special:-1" (the end).
type StartPosition struct {
	End  bool
	Mode storage.SearchMode
	Pos  int64
}

// ErrBadPosition: a start position that does not parse.
var ErrBadPosition = errors.New("position must be timestamp:<sec>, msgcount:<n>, virtual_queue:<bytes> or special:-1")

// ParseStartPosition reads a start position.
func ParseStartPosition(s string) (StartPosition, error) {
	kind, value, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return StartPosition{}, ErrBadPosition
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return StartPosition{}, ErrBadPosition
	}
	switch {
	case kind == "special" && n == -1:
		return StartPosition{End: true}, nil
	case n < 0:
		return StartPosition{}, ErrBadPosition
	case kind == "timestamp":
		if n > math.MaxInt64/int64(time.Second) {
			return StartPosition{}, ErrBadPosition
		}
		return StartPosition{Mode: storage.ByTime, Pos: n * 1e9}, nil
	case kind == "msgcount":
		return StartPosition{Mode: storage.ByCount, Pos: n}, nil
	case kind == "virtual_queue":
		return StartPosition{Mode: storage.ByOffset, Pos: n}, nil
	}
	return StartPosition{}, ErrBadPosition
}

// SetChannelOffset moves a channel of partition p, which this node must
// lead, to a start position on the leader and every ISR member.
func (b *Broker) SetChannelOffset(ctx context.Context, t *Topic, p int, name string, sp StartPosition) (topic.OffsetSet, error) {
	if !t.HasChannel(name) {
		return topic.OffsetSet{}, ErrChannelNotFound
	}
	if t.Partition(p) == nil {
		return topic.OffsetSet{}, ErrPartitionNotHere
	}
	done := make(chan topic.OffsetSet, 1)
	b.system.Root.Send(t.Partition(p), &topic.OffsetSetRequested{Channel: name, End: sp.End, Mode: sp.Mode, Pos: sp.Pos,
		Reply: func(r topic.OffsetSet) { done <- r }})
	select {
	case r := <-done:
		return r, r.Err
	case <-ctx.Done():
		return topic.OffsetSet{}, ctx.Err()
	}
}

// Consumers is how many connections this node has subscribed to a channel.
func (t *Topic) Consumers(name string) int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.consumers[name]
}
