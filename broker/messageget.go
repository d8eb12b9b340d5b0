package broker

import (
	"sort"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

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
