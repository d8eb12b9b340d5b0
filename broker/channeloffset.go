package broker

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/storage"
)

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
