package httpapi

import (
	"net/http"
	"strconv"
)

// nsqlookupd's read API, answered for this node. Clients such as go-nsq's
// ConnectToNSQLookupd need the V1 header or they find no producers.

type peerInfo struct {
	RemoteAddress    string `json:"remote_address"`
	Hostname         string `json:"hostname"`
	BroadcastAddress string `json:"broadcast_address"`
	TCPPort          int    `json:"tcp_port"`
	HTTPPort         int    `json:"http_port"`
	Version          string `json:"version"`
}

func (s *Server) peer() peerInfo {
	return peerInfo{
		RemoteAddress:    s.Node.BroadcastAddress + ":" + strconv.Itoa(s.Node.TCPPort),
		Hostname:         s.Node.Hostname,
		BroadcastAddress: s.Node.BroadcastAddress,
		TCPPort:          s.Node.TCPPort,
		HTTPPort:         s.Node.HTTPPort,
		Version:          s.Node.Version,
	}
}

type lookupMeta struct {
	PartitionNum int `json:"partition_num"`
	Replica      int `json:"replica"`
}

func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	t := s.Broker.Topic(name)
	if t == nil {
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return
	}
	p := s.peer()
	partitions := make(map[string]peerInfo, len(t.Partitions))
	for i := range t.Partitions {
		if t.Leads(i) {
			partitions[strconv.Itoa(i)] = p
		}
	}
	doc := struct {
		Channels   []string            `json:"channels"`
		Producers  []peerInfo          `json:"producers"`
		Partitions map[string]peerInfo `json:"partitions"`
		Meta       *lookupMeta         `json:"meta,omitempty"`
	}{Channels: t.ChannelNames(), Producers: []peerInfo{p}, Partitions: partitions}
	if boolParam(r, "metainfo", false) {
		doc.Meta = &lookupMeta{PartitionNum: len(t.Partitions), Replica: max(t.Replicas, 1)}
	}
	writeOK(w, doc)
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	names := []string{}
	for _, t := range s.Broker.Topics() {
		names = append(names, t.Name)
	}
	writeOK(w, map[string][]string{"topics": names})
}

func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	chans := []string{}
	if t := s.Broker.Topic(name); t != nil {
		chans = t.ChannelNames()
	}
	writeOK(w, map[string][]string{"channels": chans})
}

func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	topics := []string{}
	for _, t := range s.Broker.Topics() {
		topics = append(topics, t.Name)
	}
	node := struct {
		peerInfo
		Tombstones []bool   `json:"tombstones"`
		Topics     []string `json:"topics"`
	}{peerInfo: s.peer(), Tombstones: make([]bool, len(topics)), Topics: topics}
	writeOK(w, map[string]any{"producers": []any{node}})
}
