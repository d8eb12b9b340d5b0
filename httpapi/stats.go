package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/internal/memstats"
	"github.com/partitamq/partita/protocol"
)

// The /stats?format=json document in nsqd's shape, with one topic entry per
// partition (topic_partition, is_leader) as youzan's nsqd reports it.
type statsDoc struct {
	Version   string                 `json:"version"`
	Health    string                 `json:"health"`
	StartTime int64                  `json:"start_time"`
	Topics    []topicStats           `json:"topics"`
	Memory    *memstats.Stats        `json:"memory,omitempty"`
	Producers []protocol.ClientStats `json:"producers"`
	// WriteDisabled is youzan's /disable/write type in force on this node:
	// "all", "ordered" or "none". Not nsqd's, so after nsqd's fields, which
	// keep their order: it tells an operator a node refusing publishes was
	// told to, which otherwise only its log says.
	WriteDisabled string `json:"write_disabled"`
}

type topicStats struct {
	TopicName      string         `json:"topic_name"`
	TopicPartition string         `json:"topic_partition"`
	IsLeader       bool           `json:"is_leader"`
	Channels       []channelStats `json:"channels"`
	Depth          int64          `json:"depth"`
	BackendDepth   int64          `json:"backend_depth"`
	MessageCount   int64          `json:"message_count"`
	MessageBytes   int64          `json:"message_bytes"`
	Paused         bool           `json:"paused"`
	E2ELatency     e2eLatency     `json:"e2e_processing_latency"`
	// youzan's topic flags, and the fsync count and retention the
	// partition applies: the topic's settings, or the node's flags.
	IsMultiOrdered              bool `json:"is_multi_ordered"`
	IsChannelAutoCreateDisabled bool `json:"is_channel_auto_create_disabled"`
	SyncDisk                    int  `json:"syncdisk"`
	RetentionDays               int  `json:"retention_days"`
}

type channelStats struct {
	ChannelName   string                 `json:"channel_name"`
	Depth         int64                  `json:"depth"`
	BackendDepth  int64                  `json:"backend_depth"`
	InFlightCount int                    `json:"in_flight_count"`
	DeferredCount int                    `json:"deferred_count"`
	MessageCount  int64                  `json:"message_count"`
	RequeueCount  int64                  `json:"requeue_count"`
	TimeoutCount  int64                  `json:"timeout_count"`
	ClientCount   int                    `json:"client_count"`
	Clients       []protocol.ClientStats `json:"clients"`
	Paused        bool                   `json:"paused"`
	E2ELatency    e2eLatency             `json:"e2e_processing_latency"`
	// Skipped: youzan's /channel/skip is in effect.
	Skipped bool `json:"skipped"`
	// RateLimitKB is youzan's /channel/ratelimit in kilobytes a second, 0
	// for none; RateLimited counts the times delivery waited for it.
	RateLimitKB int64 `json:"rate_limit_kb"`
	RateLimited int64 `json:"rate_limited_count"`
	// MaxAttempts is the channel's max_attempts (0: none);
	// DeadLetteredCount the messages it published to <topic>.dead.
	MaxAttempts       uint16 `json:"max_attempts"`
	DeadLetteredCount int64  `json:"dead_lettered_count"`
	// ClientLimits are youzan's /channel/setclientlimit caps.
	ClientLimits []clientLimit `json:"client_limits"`
	// DeferredEmptied counts the deferred messages youzan's
	// /channel/emptydelayed dropped.
	DeferredEmptied int64 `json:"deferred_emptied_count"`
}

type clientLimit struct {
	Prefix string `json:"client_prefix"`
	Ready  int64  `json:"ready"`
}

// e2eLatency is nsqd's e2e_processing_latency: the window's FIN count and,
// when --e2e-processing-latency-percentile is set, each quantile's
// latency in nanoseconds; percentiles null otherwise.
type e2eLatency struct {
	Count       int                  `json:"count"`
	Percentiles []map[string]float64 `json:"percentiles"`
}

func e2eOf(s *channel.E2ESummary) e2eLatency {
	if s == nil {
		return e2eLatency{}
	}
	out := e2eLatency{Count: s.Count, Percentiles: []map[string]float64{}}
	for _, p := range s.Percentiles() {
		out.Percentiles = append(out.Percentiles, map[string]float64{"quantile": p.Quantile, "value": p.Value})
	}
	return out
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filterTopic, filterChannel := q.Get("topic"), q.Get("channel")
	doc := s.statsDoc(filterTopic, filterChannel, leadersOnly(r), boolParam(r, "include_clients", true), boolParam(r, "include_mem", true))
	if q.Get("format") == "json" {
		writeOK(w, doc)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte(statsText(doc)))
}

// nsqioAccept is the media type nsqio's own HTTP client (nsqadmin,
// nsq_stat) asks for.
const nsqioAccept = "application/vnd.nsq; version=1.0"

// leadersOnly tells whether /stats lists only the partitions this node
// leads. nsqadmin and nsq_stat add up the entries of every node /lookup
// names, so a follower's copy would count each message once per replica:
// those tools get the leaders' entries only (each message counted once,
// where it is led). Others get every partition the node holds, followers
// included. ?leaders_only=true|false overrides both.
func leadersOnly(r *http.Request) bool {
	return boolParam(r, "leaders_only", r.Header.Get("Accept") == nsqioAccept)
}

func (s *Server) statsDoc(filterTopic, filterChannel string, leadersOnly, includeClients, includeMem bool) statsDoc {
	doc := statsDoc{Version: s.Node.Version, Health: "OK", StartTime: s.Node.StartTime.Unix(),
		WriteDisabled: s.Broker.WritesDisabled().String(), Topics: []topicStats{}}
	if err := s.Broker.Health(); err != nil {
		doc.Health = "NOK - " + err.Error()
	}
	var clients []protocol.ClientStats
	if s.TCP != nil {
		clients = s.TCP.Clients()
	}
	held := s.Broker.Stats(filterTopic)
	for _, st := range held {
		if leadersOnly && !st.Leader || filterChannel != "" && !hasChannel(st, filterChannel) {
			continue
		}
		doc.Topics = append(doc.Topics, s.topicEntry(st, filterChannel, clients, includeClients))
	}
	// nsqd's lists, as it sends them: no topics and no producers for a
	// topic it does not have, no client lists when asked for none, and
	// producers only when there are some.
	if filterTopic != "" && len(held) == 0 {
		doc.Topics = nil
		includeClients = false
	}
	for _, c := range clients {
		if includeClients && len(c.PubCounts) > 0 {
			doc.Producers = append(doc.Producers, c)
		}
	}
	if includeMem {
		ms := memstats.Read()
		doc.Memory = &ms
	}
	return doc
}

func (s *Server) topicEntry(st *topic.Stats, filterChannel string, clients []protocol.ClientStats, includeClients bool) topicStats {
	ts := topicStats{
		TopicName:      st.Topic,
		TopicPartition: fmt.Sprint(st.Partition),
		IsLeader:       st.Leader,
		Channels:       []channelStats{},
		Depth:          st.Depth,
		BackendDepth:   st.Depth,
		MessageCount:   st.MessageCount,
		MessageBytes:   st.MessageBytes,
		Paused:         st.Paused,
		SyncDisk:       st.SyncEvery,
		RetentionDays:  int(st.Retention.MaxAge / (24 * time.Hour)),
	}
	if t := s.Broker.Topic(st.Topic); t != nil {
		ts.IsMultiOrdered = t.Ordered
		ts.IsChannelAutoCreateDisabled = t.Settings().DisableChannelAutoCreate
	}
	// As nsqd's, the topic's latency is that of all its channels together,
	// whichever are shown.
	var all []*channel.E2ESummary
	for _, ch := range st.Channels {
		all = append(all, ch.E2E)
	}
	ts.E2ELatency = e2eOf(channel.MergeE2E(all...))
	for _, ch := range st.Channels {
		if filterChannel != "" && ch.Name != filterChannel {
			continue
		}
		cs := channelStats{
			ChannelName:       ch.Name,
			Depth:             ch.Stats.Depth,
			BackendDepth:      ch.Stats.Depth,
			InFlightCount:     ch.Stats.InFlight,
			DeferredCount:     ch.Stats.Deferred,
			MessageCount:      ch.Stats.MessageCount,
			RequeueCount:      ch.Stats.RequeueCount,
			TimeoutCount:      ch.Stats.TimeoutCount,
			ClientCount:       len(ch.Consumers),
			Paused:            ch.Stats.Paused,
			E2ELatency:        e2eOf(ch.E2E),
			Skipped:           ch.Stats.Skipped,
			RateLimitKB:       ch.Stats.RateLimitKB,
			RateLimited:       ch.Stats.RateLimited,
			ClientLimits:      []clientLimit{},
			MaxAttempts:       ch.Stats.MaxAttempts,
			DeadLetteredCount: ch.Stats.DeadLettered,
			DeferredEmptied:   ch.Stats.DeferredEmptied,
		}
		for _, l := range ch.Stats.ClientLimits {
			cs.ClientLimits = append(cs.ClientLimits, clientLimit{Prefix: l.Prefix, Ready: l.Ready})
		}
		if includeClients {
			cs.Clients = []protocol.ClientStats{}
			for _, c := range clients {
				if c.Topic == st.Topic && c.Channel == ch.Name {
					cs.Clients = append(cs.Clients, c)
				}
			}
		}
		ts.Channels = append(ts.Channels, cs)
	}
	return ts
}

func hasChannel(st *topic.Stats, name string) bool {
	for _, ch := range st.Channels {
		if ch.Name == name {
			return true
		}
	}
	return false
}

func statsText(doc statsDoc) string {
	var b strings.Builder
	fmt.Fprintf(&b, "partita %s\nstart_time %d\nhealth: %s\n\n", doc.Version, doc.StartTime, doc.Health)
	if len(doc.Topics) == 0 {
		b.WriteString("NO_TOPICS\n")
	}
	for _, t := range doc.Topics {
		fmt.Fprintf(&b, "[%-15s/%s] depth: %-5d be-depth: %-5d msgs: %-8d paused: %t\n",
			t.TopicName, t.TopicPartition, t.Depth, t.BackendDepth, t.MessageCount, t.Paused)
		for _, c := range t.Channels {
			fmt.Fprintf(&b, "    [%-15s] depth: %-5d be-depth: %-5d inflt: %-4d def: %-4d re-q: %-5d timeout: %-5d msgs: %-8d clients: %d paused: %t\n",
				c.ChannelName, c.Depth, c.BackendDepth, c.InFlightCount, c.DeferredCount, c.RequeueCount, c.TimeoutCount, c.MessageCount, c.ClientCount, c.Paused)
		}
	}
	return b.String()
}
