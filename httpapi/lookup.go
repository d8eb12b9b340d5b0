package httpapi

import (
	"net"
	"net/http"
	"sort"
	"strconv"

	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/protocol"
)

// nsqlookupd's read API, answered by every node for the whole cluster. Clients such as go-nsq's
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

// lookupMeta is youzan's meta object; syncdisk and retention_days are
// Partita's, the topic's own settings (0: the node's flag).
type lookupMeta struct {
	PartitionNum             int  `json:"partition_num"`
	Replica                  int  `json:"replica"`
	Ordered                  bool `json:"ordered"`
	DisableChannelAutoCreate bool `json:"disable_channel_auto_create"`
	SyncDisk                 int  `json:"syncdisk"`
	RetentionDays            int  `json:"retention_days"`
	// youzan's go-nsq decodes its messages' headers when this is set.
	ExtendSupport bool `json:"extend_support"`
}

// lookup answers with every partition's leader in the cluster: producers
// are the leader nodes, partitions maps each partition to its leader.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	access := r.URL.Query().Get("access")
	if access != "" && access != "r" && access != "w" {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_ACCESS")
		return
	}
	leaders, ok, err := s.Broker.Lookup(r.Context(), name, access == "w")
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	if !ok {
		writeError(w, http.StatusNotFound, "TOPIC_NOT_FOUND")
		return
	}
	doc := struct {
		Channels   []string            `json:"channels"`
		Producers  []peerInfo          `json:"producers"`
		Partitions map[string]peerInfo `json:"partitions"`
		Meta       *lookupMeta         `json:"meta,omitempty"`
		// Partita's, with metainfo: each partition's replicas and the
		// move under way.
		Replication map[string]replicationInfo `json:"replication,omitempty"`
	}{Channels: leaders.Channels, Producers: []peerInfo{}, Partitions: map[string]peerInfo{}}
	if doc.Channels == nil {
		doc.Channels = []string{}
	}
	seen := map[string]bool{}
	for p, n := range leaders.ByPartition {
		peer := s.peerOf(n)
		doc.Partitions[strconv.Itoa(int(p))] = peer
		if !seen[n.ID] {
			seen[n.ID] = true
			doc.Producers = append(doc.Producers, peer)
		}
	}
	sort.Slice(doc.Producers, func(i, j int) bool { return doc.Producers[i].RemoteAddress < doc.Producers[j].RemoteAddress })
	if boolParam(r, "metainfo", false) {
		doc.Meta = &lookupMeta{PartitionNum: leaders.Partitions, Replica: max(leaders.Replicas, 1), Ordered: leaders.Ordered,
			DisableChannelAutoCreate: leaders.Settings.DisableChannelAutoCreate,
			SyncDisk:                 leaders.Settings.SyncEvery, RetentionDays: leaders.Settings.RetentionDays}
		doc.Meta.ExtendSupport = leaders.Ext
		if doc.Replication, err = s.replication(r, name); err != nil {
			writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
			return
		}
	}
	writeOK(w, doc)
}

// peerOf is a node's registration in nsqlookupd's producer shape; this
// node (or a registration without addresses) is described from its flags.
func (s *Server) peerOf(n cluster.NodeInfo) peerInfo {
	host, tcp, err1 := net.SplitHostPort(n.TCPAddress)
	_, httpStr, err2 := net.SplitHostPort(n.HTTPAddress)
	if err1 != nil || err2 != nil {
		return s.peer()
	}
	tcpPort, _ := strconv.Atoi(tcp)
	httpPort, _ := strconv.Atoi(httpStr)
	hostname := n.Hostname
	if hostname == "" {
		hostname = host
	}
	return peerInfo{
		RemoteAddress:    n.TCPAddress,
		Hostname:         hostname,
		BroadcastAddress: host,
		TCPPort:          tcpPort,
		HTTPPort:         httpPort,
		Version:          s.Node.Version,
	}
}

// lookupdNode is youzan's NsqLookupdNodeInfo, keys as youzan's JSON has
// them: its clients connect to NodeIP:HttpPort of each node listed.
type lookupdNode struct {
	ID       string
	NodeIP   string
	TcpPort  string
	HttpPort string
	RpcPort  string
	Epoch    int64
}

// listLookup is youzan's /listlookup: the lookup nodes and their leader.
// Every node answers the lookup API, so every live node is listed; the
// leader is the controller, its epoch the revision it was elected at.
func (s *Server) listLookup(w http.ResponseWriter, r *http.Request) {
	nodes, leader, epoch, err := s.Broker.LookupNodes(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	doc := struct {
		Nodes  []lookupdNode `json:"lookupdnodes"`
		Leader lookupdNode   `json:"lookupdleader"`
	}{Nodes: make([]lookupdNode, 0, len(nodes))}
	for _, n := range nodes {
		ln := s.lookupdNodeOf(n)
		if n.ID == leader {
			ln.Epoch = epoch
			doc.Leader = ln
		}
		doc.Nodes = append(doc.Nodes, ln)
	}
	writeOK(w, doc)
}

func (s *Server) lookupdNodeOf(n cluster.NodeInfo) lookupdNode {
	peer := s.peerOf(n)
	if s.Broker.IsSelf(n.ID) {
		peer = s.peer()
	}
	var rpc string
	if _, port, err := net.SplitHostPort(n.ClusterAddress); err == nil {
		rpc = port
	}
	return lookupdNode{ID: n.ID, NodeIP: peer.BroadcastAddress, TcpPort: strconv.Itoa(peer.TCPPort),
		HttpPort: strconv.Itoa(peer.HTTPPort), RpcPort: rpc}
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	names, err := s.Broker.TopicNames(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	writeOK(w, map[string][]string{"topics": names})
}

func (s *Server) channels(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("topic")
	if name == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	if !protocol.IsValidTopicName(name) {
		// No such topic can exist; nsqlookupd answers none for unknown ones.
		writeOK(w, map[string][]string{"channels": {}})
		return
	}
	chans, err := s.Broker.ChannelNames(r.Context(), name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	writeOK(w, map[string][]string{"channels": chans})
}

// nodes lists every live node of the cluster as an nsqlookupd producer,
// with the topics it leads a partition of and their tombstones: the nodes
// nsqadmin shows and whose /stats it reads.
func (s *Server) nodes(w http.ResponseWriter, r *http.Request) {
	list, err := s.Broker.Nodes(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	loads, draining, err := s.Broker.NodeLoads(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	type node struct {
		ID string `json:"id"` // --node-id, which moves and drains name
		peerInfo
		Tombstones []bool   `json:"tombstones"`
		Topics     []string `json:"topics"`
		Zone       string   `json:"zone"` // --zone, "" for none
		// Leaving: stopping, handing its leaderships off (SIGTERM).
		Leaving bool `json:"leaving"`
		nodeLoad
	}
	producers := make([]node, 0, len(list))
	for _, n := range list {
		peer := s.peerOf(n.Node)
		if n.Self {
			peer = s.peer()
		}
		topics, tombstones := n.Topics, n.Tombstoned
		if topics == nil {
			topics, tombstones = []string{}, []bool{}
		}
		producers = append(producers, node{ID: n.Node.ID, peerInfo: peer, Tombstones: tombstones, Topics: topics, Zone: n.Node.Zone,
			Leaving: n.Node.Leaving, nodeLoad: loadOf(loads[n.Node.ID], draining[n.Node.ID])})
	}
	writeOK(w, map[string]any{"producers": producers})
}

// tombstone answers nsqlookupd's /topic/tombstone?topic=T&node=H:P, which
// nsqadmin sends before it deletes a topic from one nsqd (then POSTs
// /topic/delete to that node). The mark is kept cluster-wide for
// nsqlookupd's 45 s and shows in /nodes; the node named then refuses that
// delete (see topicDelete), since deleting there would drop the topic from
// the whole cluster, not one node's copy.
func (s *Server) tombstone(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	topicName, node := q.Get("topic"), q.Get("node")
	if topicName == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_TOPIC")
		return
	}
	if !protocol.IsValidTopicName(topicName) {
		writeError(w, http.StatusBadRequest, "INVALID_ARG_TOPIC")
		return
	}
	if node == "" {
		writeError(w, http.StatusBadRequest, "MISSING_ARG_NODE")
		return
	}
	if err := s.Broker.Tombstone(r.Context(), topicName, node); err != nil {
		writeError(w, http.StatusInternalServerError, "INTERNAL_ERROR")
		return
	}
	writeOK(w, nil)
}

// httpAddress is this node's HTTP address as producers list it, the name
// nsqadmin gives a node it tombstones.
func (s *Server) httpAddress() string {
	return net.JoinHostPort(s.Node.BroadcastAddress, strconv.Itoa(s.Node.HTTPPort))
}
