package httpapi

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/protocol"
)

// Node describes this node for /info, /lookup and /nodes.
type Node struct {
	Version          string
	Hostname         string
	BroadcastAddress string
	TCPPort          int
	HTTPPort         int
	StartTime        time.Time
}

// Server holds what the handlers need.
type Server struct {
	Broker *broker.Broker
	TCP    *protocol.Server
	Limits protocol.Limits
	Node   Node
	// Metrics serves /metrics, if set.
	Metrics http.Handler
	// AdminAllow, if set, are the only client addresses that may call the
	// endpoints that change state (topic and channel admin); others get
	// 403 FORBIDDEN. Publishing is not admin.
	AdminAllow []netip.Prefix
	// AdminToken, if set, must come with every admin call as
	// "Authorization: Bearer <token>"; others get 401 UNAUTHORIZED.
	AdminToken string
	// Options, if set, answers /config/:opt.
	Options Options
}

// Handler returns the node's HTTP API.
func (s *Server) Handler() http.Handler {
	rt := newRouter()
	rt.handleFunc("GET", "/ping", s.ping)
	rt.handleFunc("GET", "/info", s.info)
	rt.handleFunc("POST", "/pub", s.pub)
	rt.handleFunc("POST", "/mpub", s.mpub)
	rt.handleFunc("POST", "/pubtrace", s.pubTrace)
	rt.handleFunc("POST", "/pub_ext", s.pubExt)
	rt.handleFunc("POST", broker.ForwardsPath, s.forwards)
	rt.handleFunc("GET", "/stats", s.stats)
	rt.handlePrefix("GET", "/config/", http.HandlerFunc(s.config))
	rt.handlePrefix("PUT", "/config/", s.admin(s.config))
	rt.handle("POST", "/loglevel/set", s.admin(s.logLevelSet))
	rt.handle("POST", "/topic/create", s.admin(s.topicCreate))
	rt.handle("POST", "/topic/delete", s.admin(s.topicDelete))
	rt.handle("POST", "/topic/empty", s.admin(s.topicEmpty))
	rt.handle("POST", "/topic/pause", s.admin(s.topicPause(true)))
	rt.handle("POST", "/topic/unpause", s.admin(s.topicPause(false)))
	rt.handle("POST", "/topic/meta/update", s.admin(s.topicMetaUpdate))
	rt.handle("POST", "/topic/partition/expand", s.admin(s.topicExpand))
	rt.handle("POST", "/topic/partition/move", s.admin(s.partitionMove))
	rt.handle("POST", "/cluster/node/remove", s.admin(s.nodeRemove))
	rt.handle("POST", "/channel/create", s.admin(s.channelCreate))
	rt.handle("POST", "/channel/delete", s.admin(s.channelDelete))
	rt.handle("POST", "/channel/update", s.admin(s.channelUpdate))
	rt.handle("POST", "/channel/redrive", s.admin(s.channelRedrive))
	rt.handle("POST", "/channel/empty", s.admin(s.channelEmpty))
	rt.handle("POST", "/channel/pause", s.admin(s.channelPause(true)))
	rt.handle("POST", "/channel/unpause", s.admin(s.channelPause(false)))
	rt.handle("POST", "/channel/setorder", s.admin(s.channelSetOrder))
	rt.handle("POST", "/channel/skip", s.admin(s.channelSkip(true)))
	rt.handle("POST", "/channel/unskip", s.admin(s.channelSkip(false)))
	rt.handle("POST", "/channel/ratelimit", s.admin(s.channelRateLimit))
	rt.handle("POST", "/channel/setclientlimit", s.admin(s.channelSetClientLimit))
	rt.handle("POST", "/channel/emptydelayed", s.admin(s.channelEmptyDelayed))
	rt.handleFunc("GET", "/message/historystats", s.messageHistoryStats)
	rt.handle("POST", "/channel/requeuedelayed", s.admin(s.channelRequeueDelayed))
	rt.handle("POST", "/message/finish", s.admin(s.messageFinish))
	rt.handle("POST", "/disable/write", s.admin(s.disableWrite))
	rt.handleFunc("GET", "/lookup", s.lookup)
	rt.handleFunc("GET", "/topics", s.topics)
	rt.handleFunc("GET", "/channels", s.channels)
	rt.handleFunc("GET", "/nodes", s.nodes)
	rt.handleFunc("GET", "/listlookup", s.listLookup)
	rt.handleFunc("GET", "/cluster/stats", s.clusterStats)
	rt.handle("POST", "/cluster/upgrade/begin", s.admin(s.upgradeBegin))
	rt.handle("POST", "/cluster/upgrade/done", s.admin(s.upgradeDone))
	rt.handle("POST", "/topic/tombstone", s.admin(s.tombstone))
	rt.handleFunc("GET", "/partition/last", s.partitionLast)
	rt.handleFunc("POST", "/partition/last", s.partitionsLast)
	rt.handleFunc("POST", "/partition/handover", s.partitionsHandOver)
	rt.handleFunc("GET", "/message/get", s.messageGet)
	rt.handle("POST", "/channel/setoffset", s.admin(s.channelSetOffset))
	if s.Metrics != nil {
		rt.handle("GET", "/metrics", s.Metrics)
	}
	return rt
}

func (s *Server) ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := s.Broker.Health(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("NOK - " + err.Error()))
		return
	}
	w.Write([]byte("OK"))
}

func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	writeOK(w, struct {
		Version                string `json:"version"`
		BroadcastAddress       string `json:"broadcast_address"`
		Hostname               string `json:"hostname"`
		HTTPPort               int    `json:"http_port"`
		TCPPort                int    `json:"tcp_port"`
		StartTime              int64  `json:"start_time"`
		MaxHeartbeatInterval   int64  `json:"max_heartbeat_interval"`
		MaxOutputBufferSize    int64  `json:"max_output_buffer_size"`
		MaxOutputBufferTimeout int64  `json:"max_output_buffer_timeout"`
		MaxDeflateLevel        int    `json:"max_deflate_level"`
		TopologyZone           string `json:"topology_zone"`
		TopologyRegion         string `json:"topology_region"`
	}{
		Version:                s.Node.Version,
		BroadcastAddress:       s.Node.BroadcastAddress,
		Hostname:               s.Node.Hostname,
		HTTPPort:               s.Node.HTTPPort,
		TCPPort:                s.Node.TCPPort,
		StartTime:              s.Node.StartTime.Unix(),
		MaxHeartbeatInterval:   int64(s.Limits.MaxHeartbeatInterval),
		MaxOutputBufferSize:    s.Limits.MaxOutputBufferSize,
		MaxOutputBufferTimeout: int64(s.Limits.MaxOutputBufferTimeout),
		MaxDeflateLevel:        s.Limits.MaxDeflateLevel,
	})
}

// boolParam reads nsqd's true/1/false/0, anything else being def's opposite
// rule: nsqd treats unknown values as true.
func boolParam(r *http.Request, name string, def bool) bool {
	v, ok := r.URL.Query()[name]
	if !ok || len(v) == 0 {
		return def
	}
	switch v[0] {
	case "false", "0":
		return false
	}
	return true
}

func intParam(r *http.Request, name string) (int, bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// partitionLast answers the controller: this node's last committed LogID of
// a partition it holds.
func (s *Server) partitionLast(w http.ResponseWriter, r *http.Request) {
	p, ok := intParam(r, "partition")
	if !ok {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_PARTITION")
		return
	}
	id, ok := s.Broker.LastLogID(r.URL.Query().Get("topic"), int32(p))
	if !ok {
		writeError(w, http.StatusNotFound, "PARTITION_NOT_FOUND")
		return
	}
	writeOK(w, map[string]int64{"last_log_id": id})
}

// PartitionLogID is one partition in a POST /partition/last question and
// its answer; the question leaves LastLogID out.
type PartitionLogID struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	LastLogID int64  `json:"last_log_id,omitempty"`
}

// PartitionsLast is the body of a POST /partition/last and of its answer,
// which lists only the partitions this node holds.
type PartitionsLast struct {
	Partitions []PartitionLogID `json:"partitions"`
}

// maxPartitionsLastBody bounds a POST /partition/last body: a controller
// asks about at most every partition of the cluster.
const maxPartitionsLastBody = 16 << 20

// partitionsLast answers the controller electing the leaders of many
// partitions at once: this node's last committed LogID of each it holds.
func (s *Server) partitionsLast(w http.ResponseWriter, r *http.Request) {
	var q PartitionsLast
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPartitionsLastBody)).Decode(&q); err != nil {
		writeError(w, http.StatusBadRequest, "INVALID_BODY")
		return
	}
	refs := make([]cluster.PartitionRef, len(q.Partitions))
	for i, p := range q.Partitions {
		refs[i] = cluster.PartitionRef{Topic: p.Topic, Partition: p.Partition}
	}
	ids := s.Broker.LastLogIDs(refs)
	answer := PartitionsLast{Partitions: make([]PartitionLogID, 0, len(ids))}
	for _, ref := range refs {
		if id, ok := ids[ref]; ok {
			answer.Partitions = append(answer.Partitions, PartitionLogID{Topic: ref.Topic, Partition: ref.Partition, LastLogID: id})
		}
	}
	writeOK(w, answer)
}

// admin lets only --http-admin-allow addresses through to h.
func (s *Server) admin(h http.HandlerFunc) http.Handler {
	if len(s.AdminAllow) == 0 && s.AdminToken == "" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(s.AdminAllow) > 0 && !s.adminAllowed(r.RemoteAddr) {
			writeError(w, http.StatusForbidden, "FORBIDDEN")
			return
		}
		if s.AdminToken != "" && !s.tokenGiven(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="partita"`)
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED")
			return
		}
		h(w, r)
	})
}

// tokenGiven compares in constant time, so the answer's timing does not
// tell how much of a guess was right.
func (s *Server) tokenGiven(r *http.Request) bool {
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(given), []byte(s.AdminToken)) == 1
}

func (s *Server) adminAllowed(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return false
	}
	addr := ap.Addr().Unmap()
	for _, p := range s.AdminAllow {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
