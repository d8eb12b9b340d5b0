package broker

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// youzan's /message/historystats: the bytes each partition committed in
// each of the last hours, as every replica counts them, leader or
// follower. A node samples the committed end of the partitions it holds
// every pubHistoryEvery, and when asked; the history is kept in memory
// from when the node started holding the partition.

// pubHistoryEvery is how often the committed ends are sampled: a
// commit near the turn of an hour may be counted in the next one.
const pubHistoryEvery = time.Minute

// PubHistory is one partition's committed bytes by hour, for the last 24
// hours, fed with the partition's committed end and the time.
type PubHistory struct {
	hours [24]int64
	hour  int64 // the hour (since the epoch) last observed; 0 before any
	end   int64 // the committed end last observed
}

// Observe counts what was committed since the last observation in now's
// hour. A log that restarted lower (a follower's full sync) is counted
// from there.
func (h *PubHistory) Observe(now time.Time, end int64) {
	hour := now.Unix() / 3600
	if h.hour == 0 {
		h.hour, h.end = hour, end
		return
	}
	for k := h.hour + 1; k <= hour && k <= h.hour+24; k++ {
		h.hours[k%24] = 0
	}
	h.hour = max(h.hour, hour)
	if end > h.end {
		h.hours[hour%24] += end - h.end
	}
	h.end = end
}

// Before is the bytes committed in each of the n whole hours before now's
// (n at most 23), oldest first; Current those of now's hour so far.
func (h *PubHistory) Before(now time.Time, n int) []int64 {
	hour := now.Unix() / 3600
	out := make([]int64, n)
	for i := range out {
		out[i] = h.of(hour - int64(n) + int64(i))
	}
	return out
}

// Current is the bytes committed in now's hour so far.
func (h *PubHistory) Current(now time.Time) int64 { return h.of(now.Unix() / 3600) }

// of is the bytes of one hour, 0 for an hour not observed.
func (h *PubHistory) of(hour int64) int64 {
	if h.hour == 0 || hour > h.hour || hour <= h.hour-24 {
		return 0
	}
	return h.hours[hour%24]
}

// pubHistories are the histories of the partitions a node holds.
type pubHistories struct {
	mu sync.Mutex
	of map[partitionKey]*PubHistory
}

// samplePubHistory samples every pubHistoryEvery until ctx ends.
func (b *Broker) samplePubHistory(ctx context.Context) {
	tick := time.NewTicker(pubHistoryEvery)
	defer tick.Stop()
	b.observePubHistory("") // the bases: what came before is not counted
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			b.observePubHistory("")
		}
	}
}

// observePubHistory samples the committed ends of the topic's partitions
// here (every topic's for ""), forgetting the partitions no longer held.
// It reads each commit log's End rather than asking the partition actors:
// at ten thousand partitions a request to each, once a minute, queued
// every publish behind a burst of 85–200 ms of snapshots.
func (b *Broker) observePubHistory(topicName string) map[partitionKey]bool {
	now := time.Now()
	held := map[partitionKey]bool{}
	h := &b.history
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.of == nil {
		h.of = make(map[partitionKey]*PubHistory)
	}
	for _, t := range b.Topics() {
		if topicName != "" && t.Name != topicName {
			continue
		}
		for p, slot := range t.replicas() {
			store := slot.store.Load()
			if store == nil || slot.pid.Load() == nil {
				continue
			}
			k := partitionKey{t.Name, int32(p)}
			held[k] = true
			if h.of[k] == nil {
				h.of[k] = &PubHistory{}
			}
			h.of[k].Observe(now, store.Commits.End())
		}
	}
	for k := range h.of {
		if !held[k] && (topicName == "" || k.topic == topicName) {
			delete(h.of, k)
		}
	}
	return held
}

// PartitionPubHistory is youzan's hourly_pub_size of partition p held
// here: the bytes committed in each of the 22 whole hours before this
// one, oldest first, and those of this hour so far; ok is false when the
// partition is not here.
func (b *Broker) PartitionPubHistory(topicName string, p int) (hours []int64, current int64, ok bool) {
	k := partitionKey{topicName, int32(p)}
	if !b.observePubHistory(topicName)[k] {
		return nil, 0, false
	}
	now := time.Now()
	b.history.mu.Lock()
	defer b.history.mu.Unlock()
	h := b.history.of[k]
	return h.Before(now, 22), h.Current(now), true
}

// HourPubSize is the bytes one partition held here committed in the last
// whole hour.
type HourPubSize struct {
	Topic     string
	Partition int32
	Bytes     int64
}

// LastHourPubSizes is youzan's node_hourly_pub_size_stats: every
// partition held here with the bytes it committed in the last whole hour.
func (b *Broker) LastHourPubSizes() []HourPubSize {
	b.observePubHistory("")
	now := time.Now()
	b.history.mu.Lock()
	defer b.history.mu.Unlock()
	out := make([]HourPubSize, 0, len(b.history.of))
	for k, h := range b.history.of {
		out = append(out, HourPubSize{Topic: k.topic, Partition: k.partition, Bytes: h.Before(now, 1)[0]})
	}
	slices.SortFunc(out, func(a, b HourPubSize) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}
