package httpapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
)

// channelEmptyDelayed is youzan's /channel/emptydelayed?topic&channel
// [&partition]: the channel's deferred messages are dropped and confirmed,
// on the partition named or on every partition, and the answer counts
// them: {"emptied":N}.
func (s *Server) channelEmptyDelayed(w http.ResponseWriter, r *http.Request) {
	s.onLeaders(w, r, "emptied", func(ctx context.Context, t *broker.Topic, p int, name string) (int, error) {
		return s.Broker.EmptyDeferred(ctx, t, p, name)
	})
}

// channelRequeueDelayed is youzan's /channel/requeuedelayed?topic&channel
// [&partition][&offset=hours]: the deferred messages due within offset
// hours (1 unless given) are delivered now: {"requeued":N}.
func (s *Server) channelRequeueDelayed(w http.ResponseWriter, r *http.Request) {
	hours := int64(1)
	if v := r.URL.Query().Get("offset"); v != "" {
		var err error
		if hours, err = strconv.ParseInt(v, 10, 32); err != nil || hours < 0 {
			writeError(w, http.StatusBadRequest, "INVALID_ARG_OFFSET")
			return
		}
		// A century is as far as any offset reaches: more hours wrap into
		// the past, as a duration or as the time in unix nanoseconds.
		hours = min(hours, 100*365*24)
	}
	s.onLeaders(w, r, "requeued", func(ctx context.Context, t *broker.Topic, p int, name string) (int, error) {
		return s.Broker.DeferredDue(ctx, t, p, name, time.Now().Add(time.Duration(hours)*time.Hour))
	})
}

// onLeaders does op on partition ?partition= of the channel, or on each
// partition of its topic, where it leads; a partition another node leads
// is passed on to that node once (a call passed on is not passed again,
// and answers FAILED_ON_NOT_LEADER there as youzan's does). The answer
// sums op's counts under key.
func (s *Server) onLeaders(w http.ResponseWriter, r *http.Request, key string,
	op func(context.Context, *broker.Topic, int, string) (int, error)) {
	t, name, ok := s.channelArgs(w, r)
	if !ok {
		return
	}
	parts := make([]int, t.NumPartitions())
	for i := range parts {
		parts[i] = i
	}
	if v := r.URL.Query().Get("partition"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 0 || p >= len(parts) {
			writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
			return
		}
		parts = []int{p}
	}
	total := 0
	for _, p := range parts {
		n, err := op(r.Context(), t, p, name)
		if errors.Is(err, broker.ErrPartitionNotHere) || errors.Is(err, topic.ErrNotLeader) {
			if r.Header.Get(broker.ForwardedHeader) != "" {
				writeError(w, http.StatusBadRequest, "FAILED_ON_NOT_LEADER")
				return
			}
			n, err = s.countAtLeader(r, t.Name, p, key)
		}
		if err != nil {
			writeRefusal(w, err)
			return
		}
		total += n
	}
	writeOK(w, map[string]int{key: total})
}

// leaderRefusal is a partition leader's error answer to a call passed on.
type leaderRefusal struct {
	status  int
	message string
}

func (e *leaderRefusal) Error() string { return fmt.Sprintf("%d %s", e.status, e.message) }

// countAtLeader passes the call on to partition p's leader and reads its
// count under key.
func (s *Server) countAtLeader(r *http.Request, topicName string, p int, key string) (int, error) {
	body, err := s.passOn(r, topicName, p)
	if err != nil {
		return 0, err
	}
	var counts map[string]int
	if err := json.Unmarshal(body, &counts); err != nil {
		return 0, err
	}
	return counts[key], nil
}

// passOn makes the call, for partition p, at the partition's leader, with
// the caller's credentials, and returns what it answered; a refusal is a
// leaderRefusal.
func (s *Server) passOn(r *http.Request, topicName string, p int) ([]byte, error) {
	q := r.URL.Query()
	q.Set("partition", strconv.Itoa(p))
	return s.atLeader(r, topicName, p, q, nil)
}

// atLeader makes the call r, with query q and body (nil for none), at
// partition p's leader, with the caller's credentials, and returns what it
// answered; a refusal is a leaderRefusal.
func (s *Server) atLeader(r *http.Request, topicName string, p int, q url.Values, body []byte) ([]byte, error) {
	addr, ok := s.Broker.LeaderHTTP(r.Context(), topicName, p)
	if !ok {
		return nil, &leaderRefusal{http.StatusServiceUnavailable, "NO_LIVE_LEADER"}
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.Path+"?"+q.Encode(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set(broker.ForwardedHeader, s.Broker.NodeID())
	if auth := r.Header.Get("Authorization"); auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := leaderClient.Do(req)
	if err != nil {
		return nil, &leaderRefusal{http.StatusBadGateway, "LEADER_UNREACHABLE"}
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		var doc struct {
			Message string `json:"message"`
		}
		json.Unmarshal(answer, &doc)
		return nil, &leaderRefusal{resp.StatusCode, doc.Message}
	}
	return answer, nil
}

// writeRefusal answers a leader's refusal as the leader did, and any
// other error as the broker's are answered.
func writeRefusal(w http.ResponseWriter, err error) {
	var refused *leaderRefusal
	if errors.As(err, &refused) {
		writeError(w, refused.status, refused.message)
		return
	}
	writeBrokerError(w, err)
}

// leaderClient passes operators' calls on to partition leaders.
var leaderClient = &http.Client{Timeout: 10 * time.Second}

// messageHistoryStats is youzan's /message/historystats: with
// ?topic=[&partition=] (0 unless given) the bytes the partition committed
// in each of the 22 whole hours before this one, oldest first
// ({"hourly_pub_size":[...]}, with Partita's current_hour_pub_size for
// this hour so far), answered by the leader when this node does not hold
// the partition; without a topic, every partition held here with the bytes
// of the last whole hour ({"node_hourly_pub_size_stats":[...]}).
func (s *Server) messageHistoryStats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tn := q.Get("topic")
	if tn == "" {
		type entry struct {
			Topic     string `json:"topic_name"`
			Partition string `json:"topic_partition"`
			Bytes     int64  `json:"hourly_pub_size"`
		}
		out := []entry{}
		for _, h := range s.Broker.LastHourPubSizes() {
			out = append(out, entry{h.Topic, strconv.Itoa(int(h.Partition)), h.Bytes})
		}
		writeOK(w, map[string][]entry{"node_hourly_pub_size_stats": out})
		return
	}
	t, ok := s.existingTopic(w, r, true)
	if !ok {
		return
	}
	p, err := strconv.Atoi(cmp.Or(q.Get("partition"), "0"))
	if err != nil || p < 0 || p >= t.NumPartitions() {
		writeError(w, http.StatusBadRequest, "INVALID_PARTITION")
		return
	}
	hours, current, here := s.Broker.PartitionPubHistory(tn, p)
	if !here {
		if r.Header.Get(broker.ForwardedHeader) != "" {
			writeError(w, http.StatusNotFound, "PARTITION_NOT_FOUND")
			return
		}
		body, err := s.passOn(r, tn, p)
		if err != nil {
			writeRefusal(w, err)
			return
		}
		writeOK(w, json.RawMessage(body))
		return
	}
	writeOK(w, struct {
		Hours   []int64 `json:"hourly_pub_size"`
		Current int64   `json:"current_hour_pub_size"`
	}{hours, current})
}
