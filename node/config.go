package node

import (
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
)

// envPrefix starts the environment variable of every flag: --tcp-address is
// read from PARTITA_TCP_ADDRESS.
const envPrefix = "PARTITA_"

// Config holds the node's settings. Every field but LevelVar is one flag;
// the same value can come from the environment or the --config TOML file.
type Config struct {
	Config   string
	LogLevel string
	DataPath string

	// LevelVar, when set, is the level of the logger the node is started
	// with: PUT /config/log_level changes it. Without it the level is fixed.
	LevelVar *slog.LevelVar

	TCPAddress     string
	HTTPAddress    string
	ClusterAddress string

	EtcdClientAddress  string
	EtcdPeerAddress    string
	EtcdEndpoints      string
	EtcdInitialCluster string
	// EtcdInitialClusterState is "existing" for a member that replaces a
	// lost one in a running cluster.
	EtcdInitialClusterState string
	EtcdTickMS              int
	EtcdElectionMS          int
	// EtcdDataPath is where the embedded etcd keeps its data, "" for
	// <data-path>/etcd.
	EtcdDataPath string

	NodeID string
	// Zone is the node's failure domain; placement spreads each
	// partition's replicas over the zones.
	Zone string
	// BroadcastAddr is --broadcast-address as given; use BroadcastAddress()
	// for the address to announce.
	BroadcastAddr string

	DefaultPartitions int
	DefaultReplicas   int

	MaxMsgSize  int64
	MaxBodySize int64
	MaxRdyCount int64

	MsgTimeout           time.Duration
	MaxMsgTimeout        time.Duration
	MaxReqTimeout        time.Duration
	ReqToEndThreshold    time.Duration
	RetentionDays        int
	RetentionBytes       int64
	RetentionCheck       time.Duration
	DedupeWindow         time.Duration
	DedupeMaxEntries     int
	FileIdleTimeout      time.Duration
	ClientTimeout        time.Duration
	MaxHeartbeatInterval time.Duration

	MaxOutputBufferSize    int64
	OutputBufferTimeout    time.Duration
	MinOutputBufferTimeout time.Duration
	MaxOutputBufferTimeout time.Duration
	FINReadDelay           time.Duration

	MaxDeflateLevel     int
	Snappy              bool
	Deflate             bool
	MaxChannelConsumers int
	MaxAttempts         int

	SyncEvery         int
	SyncTimeout       time.Duration
	Journal           bool
	JournalCheckpoint time.Duration
	MaxBytesPerFile   int64
	RawDiskWrites     bool

	WriteTimeout   time.Duration
	ISRShrinkAfter time.Duration
	ISRLagMax      time.Duration
	ForwardTimeout time.Duration
	MaxClockSkew   time.Duration
	// ForwardMoveGrace: broker.Config.ForwardMoveGrace.
	ForwardMoveGrace time.Duration
	// LeaderMoveDrain: cluster.Controller.HandOverWait; 0 moves
	// leaderships without asking the old leaders to drain. At most
	// maxLeaderMoveDrain: the controller's loop waits behind it.
	LeaderMoveDrain time.Duration

	ClusterBroadcastAddress string
	NodeLeaseTTL            time.Duration
	NodeLapseGrace          time.Duration
	ReplicaRepairAfter      time.Duration
	BalanceInterval         time.Duration
	MaxReplicaMoves         int
	ResignedLeaderWait      time.Duration
	LeaderBalanceInterval   time.Duration
	LeaderBalanceMoves      int
	ReplicaHeartbeat        time.Duration
	ReplicaDownAfter        time.Duration
	ReplicaRedialMax        time.Duration
	WriteWindow             int
	ReplicaFramesInFlight   int
	CatchupRateLimit        int64
	MaxBatchMessages        int
	MaxPubWaiting           int
	MaxNodePubWaiting       int
	PubLatencyTarget        time.Duration
	GCPercent               int
	MaxConfirmWindow        int

	ChannelPersistInterval time.Duration
	ChannelStateDelay      time.Duration
	ShutdownTimeout        time.Duration
	// ShutdownHandOff: how long a stopping node waits for its leaderships
	// to move (Node.leave); 0 stops at once, leaving them to failover.
	ShutdownHandOff time.Duration
	MemQueueSize    int64

	TLSCert             string
	TLSKey              string
	TLSMinVersion       string
	HTTPSAddress        string
	TLSRootCAFile       string
	TLSRequired         string
	TLSClientAuthPolicy string

	AuthHTTPAddress       string
	AuthHTTPRequestMethod string

	MaxConnections int
	MaxTopics      int
	HTTPAdminAllow string
	HTTPAdminToken string

	E2EQuantiles []float64
	E2EWindow    time.Duration

	StatsdAddress          string
	StatsdPrefix           string
	StatsdInterval         time.Duration
	StatsdMemStats         bool
	StatsdUDPPacketSize    int
	StatsdExcludeEphemeral bool

	ClusterTLSCert string
	ClusterTLSKey  string
	ClusterTLSCA   string
}

// LoadConfig reads the settings from args (without the program name), the
// environment seen through getenv and the TOML file named by --config, in
// that order of precedence, then validates them. On --help it prints the
// flags and returns flag.ErrHelp. The FlagSet is returned so the caller can
// print usage on error.
func LoadConfig(args []string, getenv func(string) string) (Config, *flag.FlagSet, error) {
	var c Config
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, fs, err
		}
		return c, fs, fmt.Errorf("command line: %w", err)
	}
	if fs.NArg() > 0 {
		return c, fs, fmt.Errorf("command line: unexpected arguments %q", fs.Args())
	}

	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })

	if !onCommandLine["config"] {
		if path := getenv(envName("config")); path != "" {
			c.Config = path
		}
	}
	if c.Config != "" {
		if err := applyConfigFile(fs, c.Config, onCommandLine); err != nil {
			return c, fs, err
		}
	}
	if err := applyEnv(fs, getenv, onCommandLine); err != nil {
		return c, fs, err
	}
	if err := c.validate(); err != nil {
		return c, fs, err
	}
	return c, fs, nil
}

func newFlagSet(c *Config) *flag.FlagSet {
	fs := flag.NewFlagSet("partita", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage of partita:\n")
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nEvery flag can also be set by the environment variable %s<FLAG_NAME>"+
			" (e.g. PARTITA_TCP_ADDRESS)\nor in the --config TOML file (e.g. tcp_address = \"0.0.0.0:4150\").\n"+
			"Command line beats environment beats config file.\n", envPrefix)
	}

	fs.StringVar(&c.Config, "config", "", "path to a TOML config file")
	fs.StringVar(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&c.DataPath, "data-path", "./data", "directory for partition logs and node state")

	fs.StringVar(&c.TCPAddress, "tcp-address", "0.0.0.0:4150", "<addr>:<port> to listen on for TCP clients")
	fs.StringVar(&c.HTTPAddress, "http-address", "0.0.0.0:4151", "<addr>:<port> to listen on for HTTP clients")
	fs.StringVar(&c.ClusterAddress, "cluster-address", "0.0.0.0:4152", "<addr>:<port> to listen on for node-to-node replication")

	fs.StringVar(&c.EtcdClientAddress, "etcd-client-address", "127.0.0.1:4379", "<addr>:<port> for the embedded etcd's clients")
	fs.StringVar(&c.EtcdPeerAddress, "etcd-peer-address", "127.0.0.1:4380", "<addr>:<port> for the embedded etcd's peers")
	fs.StringVar(&c.EtcdEndpoints, "etcd-endpoints", "", "comma-separated endpoints of an external etcd; when set no embedded etcd starts")
	fs.StringVar(&c.EtcdInitialCluster, "etcd-initial-cluster", "", "initial cluster of the embedded etcd (name=http://host:port,...)")
	fs.StringVar(&c.EtcdInitialClusterState, "etcd-initial-cluster-state", "new", "new, or existing for a member added to a running cluster (docs/operations.md)")
	fs.IntVar(&c.EtcdTickMS, "etcd-tick-ms", 0, "embedded etcd heartbeat tick in milliseconds (0 = etcd default)")
	fs.IntVar(&c.EtcdElectionMS, "etcd-election-ms", 0, "embedded etcd election timeout in milliseconds (0 = etcd default)")
	fs.StringVar(&c.EtcdDataPath, "etcd-data-path", "", "directory of the embedded etcd's data (default <data-path>/etcd); etcd syncs every write and renews leases behind those syncs, so on a busy node give it a disk of its own")

	fs.StringVar(&c.NodeID, "node-id", defaultNodeID(), "this node's ID, unique in the cluster: letters, digits, '.', '_' or '-' (default: a hash of the hostname in 0..1023, as nsqd's)")
	fs.StringVar(&c.Zone, "zone", "", "failure domain of this node (rack, room, cloud zone): each partition's replicas go to as many different zones as there are (empty = none)")
	fs.StringVar(&c.BroadcastAddr, "broadcast-address", "", "address announced to clients and lookupd (default: host of --tcp-address, or the hostname)")

	fs.IntVar(&c.DefaultPartitions, "default-partitions", 1, "partitions of a topic created without an explicit count")
	fs.IntVar(&c.DefaultReplicas, "default-replicas", 1, "replicas of each partition of a new topic")

	fs.Int64Var(&c.MaxMsgSize, "max-msg-size", 1048576, "maximum size of a single message in bytes")
	fs.Int64Var(&c.MaxBodySize, "max-body-size", 5242880, "maximum size of a single command body in bytes")
	fs.Int64Var(&c.MaxRdyCount, "max-rdy-count", 2500, "maximum RDY count for a client")

	fs.DurationVar(&c.MsgTimeout, "msg-timeout", 60*time.Second, "default time to wait for a message to be finished before requeueing it")
	fs.DurationVar(&c.MaxMsgTimeout, "max-msg-timeout", 15*time.Minute, "maximum message timeout a client may ask for")
	fs.DurationVar(&c.MaxReqTimeout, "max-req-timeout", time.Hour, "maximum requeue and DPUB delay (raise it to delay by days)")
	fs.DurationVar(&c.ReqToEndThreshold, "req-to-end-threshold", 15*time.Minute, "a REQ delayed longer is copied into the partition log (replicated, kept across restarts) instead of waiting in memory")
	fs.DurationVar(&c.ClientTimeout, "client-timeout", 60*time.Second, "time without a heartbeat response before a client is closed (heartbeat default is half)")
	fs.DurationVar(&c.MaxHeartbeatInterval, "max-heartbeat-interval", 60*time.Second, "maximum heartbeat interval a client may ask for")

	fs.Int64Var(&c.MaxOutputBufferSize, "max-output-buffer-size", 65536, "maximum output buffer size a client may ask for")
	fs.DurationVar(&c.OutputBufferTimeout, "output-buffer-timeout", 250*time.Millisecond, "default output buffer flush timeout")
	fs.DurationVar(&c.MinOutputBufferTimeout, "min-output-buffer-timeout", 25*time.Millisecond, "minimum output buffer timeout a client may ask for")
	fs.DurationVar(&c.MaxOutputBufferTimeout, "max-output-buffer-timeout", 30*time.Second, "maximum output buffer timeout a client may ask for")
	fs.DurationVar(&c.FINReadDelay, "fin-read-delay", time.Millisecond, "after a FIN, a consumer connection's reader waits this long for more FINs to gather while the client holds at least eight times as long of messages (0: read at once)")

	fs.IntVar(&c.MaxDeflateLevel, "max-deflate-level", 6, "maximum deflate level a client may ask for (1-9)")
	fs.BoolVar(&c.Snappy, "snappy", true, "allow clients to negotiate snappy compression")
	fs.BoolVar(&c.Deflate, "deflate", true, "allow clients to negotiate deflate compression")
	fs.IntVar(&c.MaxChannelConsumers, "max-channel-consumers", 0, "maximum consumers per channel (0 = unlimited)")
	fs.IntVar(&c.MaxAttempts, "max-attempts", 0, "max_attempts of a channel created without one: deliveries before a message goes to <topic>.dead (0 = unlimited)")

	fs.IntVar(&c.SyncEvery, "sync-every", 2500, "commits between fsyncs (1 = fsync every commit)")
	fs.DurationVar(&c.SyncTimeout, "sync-timeout", 2*time.Second, "longest time between fsyncs of a partition with unsynced commits")
	fs.BoolVar(&c.Journal, "journal", true, "record every partition write in one journal per node, and make writes durable by --sync-timeout with an fdatasync of it; --journal=false makes them durable with a syncfs of the data directory's filesystem instead (docs/operations.md, \"The node's journal\")")
	fs.DurationVar(&c.JournalCheckpoint, "journal-checkpoint", 2*time.Minute, "with --journal: time between syncfs calls that make the partition files durable and let the journal start over")
	fs.Int64Var(&c.MaxBytesPerFile, "max-bytes-per-file", 104857600, "segment file size in bytes before rotating")
	fs.BoolVar(&c.RawDiskWrites, "raw-disk-writes", true, "append to the log with system calls that do not wake the Go runtime's monitor thread; any write slower than 5ms turns them off for a second")

	fs.DurationVar(&c.WriteTimeout, "write-timeout", 5*time.Second, "a write not committed within this time fails")
	fs.DurationVar(&c.ISRShrinkAfter, "isr-shrink-after", time.Second, "time writes wait for followers whose replication stream is down before they leave the ISR, and between tries of a follower's ISR join")
	fs.DurationVar(&c.ISRLagMax, "isr-lag-max", 4*time.Second, "time a write may wait for a follower that is connected but behind before it leaves the ISR (Kafka's replica.lag.time.max.ms); a follower that fails a write leaves at once")
	fs.DurationVar(&c.ForwardTimeout, "forward-timeout", broker.DefaultForwardTimeout, "a publish this node forwards to its partition's leader on another node fails after this long; keep it within the clients' own publish timeout")
	fs.DurationVar(&c.ForwardMoveGrace, "forward-move-grace", broker.DefaultForwardMoveGrace, "a publish this node forwarded to a leader whose leadership then moved in a planned move (the leader still registered) waits this long for the former leader's answer, which sends on what it never wrote, before it fails (0 = at once)")
	fs.DurationVar(&c.LeaderMoveDrain, "leader-move-drain", cluster.DefaultHandOverWait, "before a planned leader move (asked, leader balance, drain, replica move off the leader) the controller has the old leader hold its writes until none is in flight, and waits up to this long for it, so the move fails none of its publishes (0 = move at once, failing the writes in flight; at most 2s)")
	fs.DurationVar(&c.MaxClockSkew, "max-clock-skew", broker.DefaultMaxClockSkew, "largest difference between the nodes' clocks: a leader stops writing a forwarded publish this long before its forwarder gives up on it")
	fs.StringVar(&c.ClusterBroadcastAddress, "cluster-broadcast-address", "", "address:port peers dial for replication (default: --cluster-address, with its host replaced by --broadcast-address when unspecified)")
	fs.DurationVar(&c.NodeLeaseTTL, "node-lease-ttl", 2*time.Second, "lease of this node's registration in etcd: how long a dead node stays registered")
	fs.DurationVar(&c.NodeLapseGrace, "node-lapse-grace", 5*time.Second, "a node whose registration lapsed while this node's replication session to it still answers keeps leading its partitions this long, to register again, before the controller fails them over (0 = fail over at once)")
	fs.DurationVar(&c.ReplicaRepairAfter, "replica-repair-after", 10*time.Minute, "a replica on a node gone this long is re-created on another live node")
	fs.DurationVar(&c.BalanceInterval, "balance-interval", 5*time.Minute, "how often the controller moves replicas off nodes holding more than the average rounded up plus one, and onto nodes holding fewer than the average rounded down minus one, such as a node that joined (0 = never)")
	fs.IntVar(&c.MaxReplicaMoves, "max-replica-moves", 8, "replica moves drains and the balance keep under way at once, cluster-wide")
	fs.DurationVar(&c.ResignedLeaderWait, "resigned-leader-wait", 30*time.Second, "a partition whose leader resigned after a restart waits this long for its whole ISR before a leader is elected among the members that are live")
	fs.DurationVar(&c.LeaderBalanceInterval, "leader-balance-interval", 5*time.Minute, "how often the controller gives leadership back to each partition's preferred replica when it is in the ISR (0 = never)")
	fs.IntVar(&c.LeaderBalanceMoves, "leader-balance-moves", 32, "most leaderships one round of the leader balance moves")
	fs.DurationVar(&c.ReplicaHeartbeat, "replica-heartbeat", 200*time.Millisecond, "heartbeat interval on replication streams")
	fs.DurationVar(&c.ReplicaDownAfter, "replica-down-after", 600*time.Millisecond, "a replication peer silent this long is down")
	fs.DurationVar(&c.ReplicaRedialMax, "replica-redial-max", replica.DefaultRedialMax, "wait between a leader's attempts to reach a follower it lost, once an early attempt 100–200 ms after the loss failed; spread, so the partitions a dead node followed do not all retry at once")
	fs.IntVar(&c.WriteWindow, "write-window", 4, "records in flight per partition; publishes arriving meanwhile are coalesced into the next record")
	fs.IntVar(&c.ReplicaFramesInFlight, "replica-frames-in-flight", 2, "frames of writes a follower may leave unanswered per partition; writes made meanwhile leave together in the next frame")
	fs.Int64Var(&c.CatchupRateLimit, "catchup-rate-limit", 50<<20, "bytes per second this node sends replicas catching up, in all (moves, repairs, restarted followers), so they leave disk and network to live writes (0 = no limit)")
	fs.IntVar(&c.MaxBatchMessages, "max-batch-messages", 1000, "most messages committed together (group commit cap)")
	fs.IntVar(&c.MaxPubWaiting, "max-pub-waiting", 100000, "messages queued per partition before E_PUB_TOO_MUCH_WAITING")
	fs.IntVar(&c.MaxNodePubWaiting, "max-node-pub-waiting", 20000, "messages this node may have taken and not yet answered, over every partition, before E_PUB_TOO_MUCH_WAITING; the bound shrinks while a queue stands (0 = no bound)")
	fs.DurationVar(&c.PubLatencyTarget, "pub-latency-target", 100*time.Millisecond, "when even the quickest answer over an interval this long is later than this, a queue stands and the node takes fewer publishes at once (0 = a fixed --max-node-pub-waiting)")
	fs.IntVar(&c.GCPercent, "gc-percent", 400, "Go garbage collection target (GOGC): heap growth in percent over the live heap before a collection; -1 turns collection off. When the flag is not set, a GOGC environment variable wins")
	fs.IntVar(&c.MaxConfirmWindow, "max-confirm-window", 20000, "unconfirmed messages a channel holds before it pauses reading")

	fs.IntVar(&c.RetentionDays, "retention-days", 0, "delete log segments older than this many days once every channel confirmed them (0 = keep)")
	fs.Int64Var(&c.RetentionBytes, "retention-bytes", 0, "delete the oldest confirmed log segments while a partition's log is larger (0 = no limit)")
	fs.DurationVar(&c.DedupeWindow, "dedupe-window", 0, "idempotent publish: within this window a message whose ##msg_id its partition already wrote is answered as the first and not written again, for topics that set no dedupe_window (0 = off)")
	fs.IntVar(&c.DedupeMaxEntries, "dedupe-max-entries", topic.DefaultDedupeMaxEntries, "message IDs each partition's dedupe window remembers at most, the oldest forgotten first")
	fs.DurationVar(&c.RetentionCheck, "retention-check-interval", time.Minute, "how often each partition applies --retention-days and --retention-bytes, while its log has a segment besides the active one")
	fs.DurationVar(&c.FileIdleTimeout, "file-idle-timeout", 30*time.Second, "a partition file unused this long closes its descriptor until its next use, so idle partitions hold no open files")
	fs.DurationVar(&c.ChannelPersistInterval, "channel-persist-interval", 2*time.Second, "longest time a changed channel offset waits to be written to disk and fully sent to the followers")
	fs.DurationVar(&c.ChannelStateDelay, "channel-state-delay", time.Second, "longest time a channel state saved on the channel's own clock waits for the node's next batch of states, so that thousands of channels share one syncfs; a state an answer waits for (an ordered FIN's, a follower's offset) is written at once; 0 writes every state at once")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 25*time.Second, "longest a graceful shutdown may take")
	fs.DurationVar(&c.ShutdownHandOff, "shutdown-handoff", 10*time.Second, "on SIGTERM, a node of a cluster first has the controller move its leaderships to other in-sync replicas, drained as any leader move, and waits up to this long for them before it stops, so its publishers see no failure (0 = stop at once and let failover elect new leaders; less than --shutdown-timeout)")
	fs.Int64Var(&c.MemQueueSize, "mem-queue-size", 0, "accepted for nsqd compatibility, has no effect: every message is on disk")

	fs.StringVar(&c.TLSMinVersion, "tls-min-version", "tls1.2", "oldest TLS version the client port and the HTTPS port accept: tls1.0, tls1.1, tls1.2 or tls1.3")
	fs.StringVar(&c.HTTPSAddress, "https-address", "", "<addr>:<port> to serve the HTTP API over TLS with --tls-cert and --tls-key (empty = none)")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "path to the client port's certificate file (enables IDENTIFY tls_v1)")
	fs.StringVar(&c.TLSKey, "tls-key", "", "path to the client port's key file")
	fs.StringVar(&c.TLSRootCAFile, "tls-root-ca-file", "", "path to a PEM file of CAs that verify client certificates")
	fs.StringVar(&c.TLSRequired, "tls-required", "false", "require TLS on the client port: false, true or tcp-https (both refuse every command but IDENTIFY before the upgrade; the HTTP port is plain)")
	fs.StringVar(&c.TLSClientAuthPolicy, "tls-client-auth-policy", "", "client certificate policy: require or require-verify (verified against --tls-root-ca-file)")
	fs.StringVar(&c.AuthHTTPAddress, "auth-http-address", "", "comma-separated <addr>:<port> of nsqd-compatible auth services; when set clients must AUTH before PUB, MPUB, DPUB and SUB")
	fs.StringVar(&c.AuthHTTPRequestMethod, "auth-http-request-method", "get", "HTTP method of auth queries: get or post")
	fs.IntVar(&c.MaxConnections, "max-connections", 0, "maximum open client connections on the TCP port (0 = unlimited)")
	fs.IntVar(&c.MaxTopics, "max-topics", 0, "maximum topics a node serves; creating one more fails (0 = unlimited)")
	fs.StringVar(&c.HTTPAdminAllow, "http-admin-allow", "", "comma-separated CIDRs allowed to call HTTP endpoints that change state (empty = anyone)")
	fs.StringVar(&c.HTTPAdminToken, "http-admin-token", "", "when set, HTTP endpoints that change state also require the header 'Authorization: Bearer <token>'; set it through PARTITA_HTTP_ADMIN_TOKEN or --config rather than the command line, which other users can read")
	fs.Var((*floatList)(&c.E2EQuantiles), "e2e-processing-latency-percentile", "quantiles in (0, 1] of each channel's end-to-end processing latency (publish to FIN) to estimate, comma-separated or the flag repeated, e.g. 1.0,0.99,0.95 (none by default)")
	fs.DurationVar(&c.E2EWindow, "e2e-processing-latency-window-time", 10*time.Minute, "the estimates cover the FINs of the last half to whole of this window")
	fs.StringVar(&c.StatsdAddress, "statsd-address", "", "UDP <addr>:<port> of a statsd daemon to push nsqd's metrics to (empty = none)")
	fs.StringVar(&c.StatsdPrefix, "statsd-prefix", "nsq.%s", "prefix of the statsd keys (%s for the node's host key: broadcast address and HTTP port)")
	fs.DurationVar(&c.StatsdInterval, "statsd-interval", 60*time.Second, "time between pushes to statsd")
	fs.BoolVar(&c.StatsdMemStats, "statsd-mem-stats", true, "push memory and GC figures to statsd")
	fs.IntVar(&c.StatsdUDPPacketSize, "statsd-udp-packet-size", 508, "largest statsd UDP packet in bytes")
	fs.BoolVar(&c.StatsdExcludeEphemeral, "statsd-exclude-ephemeral", false, "leave #ephemeral topics and channels out of statsd")
	fs.StringVar(&c.ClusterTLSCert, "cluster-tls-cert", "", "certificate this node presents on the node-to-node port, both as server and as client")
	fs.StringVar(&c.ClusterTLSKey, "cluster-tls-key", "", "key of --cluster-tls-cert")
	fs.StringVar(&c.ClusterTLSCA, "cluster-tls-ca", "", "PEM file of the CA that signs every node's cluster certificate; with it the node-to-node port is mutual TLS")
	return fs
}

// defaultNodeID spreads nodes over [0,1024) by hostname, as nsqd does, so a
// small cluster usually needs no --node-id.
func defaultNodeID() string {
	host, err := os.Hostname()
	if err != nil {
		return "0"
	}
	return strconv.Itoa(int(crc32.ChecksumIEEE([]byte(host)) % 1024))
}

// validNodeID keeps node IDs usable in etcd keys, actor names and URLs.
func validNodeID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func tomlKey(flagName string) string {
	return strings.ReplaceAll(flagName, "-", "_")
}

// applyEnv sets every flag not given on the command line whose environment
// variable is non-empty.
func applyEnv(fs *flag.FlagSet, getenv func(string) string, onCommandLine map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || onCommandLine[f.Name] || f.Name == "config" {
			return
		}
		name := envName(f.Name)
		value := getenv(name)
		if value == "" {
			return
		}
		if setErr := fs.Set(f.Name, value); setErr != nil {
			err = fmt.Errorf("environment variable %s: invalid value %q for --%s: %s", name, value, f.Name, wantedValue(f))
		}
	})
	return err
}

// applyConfigFile sets every flag not given on the command line that the
// TOML file names. The environment is applied afterwards and so wins.
func applyConfigFile(fs *flag.FlagSet, path string, onCommandLine map[string]bool) error {
	var values map[string]any
	if _, err := toml.DecodeFile(path, &values); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}

	flagByKey := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" {
			flagByKey[tomlKey(f.Name)] = f.Name
		}
	})
	var unknown []string
	for key := range values {
		if _, ok := flagByKey[key]; !ok {
			unknown = append(unknown, key)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("config file %s: unknown keys: %s", path, strings.Join(unknown, ", "))
	}

	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys) // report the same first error on every run
	for _, key := range keys {
		name := flagByKey[key]
		if onCommandLine[name] {
			continue
		}
		value, err := tomlValueString(values[key])
		if err != nil {
			return fmt.Errorf("config file %s: key %s (--%s): %v", path, key, name, err)
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("config file %s: key %s: invalid value %q for --%s: %s", path, key, value, name, wantedValue(fs.Lookup(name)))
		}
	}
	return nil
}

// tomlValueString turns a decoded TOML scalar into the text the flag parses,
// so the flag's own parser checks it exactly as it checks the command line.
func tomlValueString(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case bool:
		return strconv.FormatBool(v), nil
	default:
		return "", fmt.Errorf("want a string, integer or boolean, got %T", v)
	}
}

// wantedValue says what a flag accepts; the flag package's own parse errors
// only say "parse error".
func wantedValue(f *flag.Flag) string {
	getter, ok := f.Value.(flag.Getter)
	if !ok {
		return "not accepted"
	}
	switch getter.Get().(type) {
	case time.Duration:
		return `want a duration such as "250ms" or "1h"`
	case int, int64:
		return "want an integer"
	case bool:
		return "want true or false"
	default:
		return "not accepted"
	}
}

// maxLeaderMoveDrain bounds --leader-move-drain: the controller's loop
// waits behind a drain (all but a lost node's elections, which end the
// wait: cluster/losses.go).
const maxLeaderMoveDrain = 2 * time.Second

func (c Config) validate() error {
	if s := c.EtcdInitialClusterState; s != "" && s != "new" && s != "existing" {
		return fmt.Errorf("--etcd-initial-cluster-state is %q: must be new or existing", c.EtcdInitialClusterState)
	}
	for _, a := range []struct{ flag, value string }{
		{"tcp-address", c.TCPAddress},
		{"http-address", c.HTTPAddress},
		{"cluster-address", c.ClusterAddress},
		{"etcd-client-address", c.EtcdClientAddress},
		{"etcd-peer-address", c.EtcdPeerAddress},
	} {
		if err := checkHostPort(a.value); err != nil {
			return fmt.Errorf("--%s %q: %v", a.flag, a.value, err)
		}
	}
	if c.EtcdEndpoints != "" && slices.Contains(strings.Split(c.EtcdEndpoints, ","), "") {
		return fmt.Errorf("--etcd-endpoints %q: empty endpoint in list", c.EtcdEndpoints)
	}

	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return fmt.Errorf("--log-level %q: must be one of debug, info, warn, error", c.LogLevel)
	}
	if c.DataPath == "" {
		return errors.New("--data-path must not be empty")
	}

	for _, p := range []struct {
		flag  string
		value int64
	}{
		{"max-msg-size", c.MaxMsgSize},
		{"max-body-size", c.MaxBodySize},
		{"max-output-buffer-size", c.MaxOutputBufferSize},
		{"max-bytes-per-file", c.MaxBytesPerFile},
		{"max-rdy-count", c.MaxRdyCount},
		{"default-replicas", int64(c.DefaultReplicas)},
		{"sync-every", int64(c.SyncEvery)},
		{"write-window", int64(c.WriteWindow)},
		{"replica-frames-in-flight", int64(c.ReplicaFramesInFlight)},
		{"max-batch-messages", int64(c.MaxBatchMessages)},
		{"max-pub-waiting", int64(c.MaxPubWaiting)},
		{"max-confirm-window", int64(c.MaxConfirmWindow)},
		{"max-replica-moves", int64(c.MaxReplicaMoves)},
		{"statsd-udp-packet-size", int64(c.StatsdUDPPacketSize)},
	} {
		if p.value < 1 {
			return fmt.Errorf("--%s is %d: must be at least 1", p.flag, p.value)
		}
	}
	for _, n := range []struct {
		flag  string
		value int64
	}{
		{"etcd-tick-ms", int64(c.EtcdTickMS)},
		{"etcd-election-ms", int64(c.EtcdElectionMS)},
		{"max-channel-consumers", int64(c.MaxChannelConsumers)},
		{"max-attempts", int64(c.MaxAttempts)},
		{"max-connections", int64(c.MaxConnections)},
		{"max-topics", int64(c.MaxTopics)},
		{"max-node-pub-waiting", int64(c.MaxNodePubWaiting)},
		{"mem-queue-size", c.MemQueueSize},
		{"retention-days", int64(c.RetentionDays)},
		{"retention-bytes", c.RetentionBytes},
		{"dedupe-max-entries", int64(c.DedupeMaxEntries)},
		{"catchup-rate-limit", c.CatchupRateLimit},
	} {
		if n.value < 0 {
			return fmt.Errorf("--%s is %d: must not be negative", n.flag, n.value)
		}
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{
		{"msg-timeout", c.MsgTimeout},
		{"max-msg-timeout", c.MaxMsgTimeout},
		{"max-req-timeout", c.MaxReqTimeout},
		{"req-to-end-threshold", c.ReqToEndThreshold},
		{"retention-check-interval", c.RetentionCheck},
		{"file-idle-timeout", c.FileIdleTimeout},
		{"client-timeout", c.ClientTimeout},
		{"max-heartbeat-interval", c.MaxHeartbeatInterval},
		{"output-buffer-timeout", c.OutputBufferTimeout},
		{"min-output-buffer-timeout", c.MinOutputBufferTimeout},
		{"max-output-buffer-timeout", c.MaxOutputBufferTimeout},
		{"sync-timeout", c.SyncTimeout},
		{"journal-checkpoint", c.JournalCheckpoint},
		{"write-timeout", c.WriteTimeout},
		{"isr-shrink-after", c.ISRShrinkAfter},
		{"isr-lag-max", c.ISRLagMax},
		{"forward-timeout", c.ForwardTimeout},
		{"max-clock-skew", c.MaxClockSkew},
		{"node-lease-ttl", c.NodeLeaseTTL},
		{"replica-repair-after", c.ReplicaRepairAfter},
		{"resigned-leader-wait", c.ResignedLeaderWait},
		{"replica-heartbeat", c.ReplicaHeartbeat},
		{"replica-down-after", c.ReplicaDownAfter},
		{"replica-redial-max", c.ReplicaRedialMax},
		{"channel-persist-interval", c.ChannelPersistInterval},
		{"shutdown-timeout", c.ShutdownTimeout},
		{"statsd-interval", c.StatsdInterval},
		{"e2e-processing-latency-window-time", c.E2EWindow},
	} {
		if d.value <= 0 {
			return fmt.Errorf("--%s is %v: must be positive", d.flag, d.value)
		}
	}
	if c.ChannelStateDelay < 0 {
		return fmt.Errorf("--channel-state-delay is %v: must not be negative", c.ChannelStateDelay)
	}

	if c.DedupeWindow < 0 || c.DedupeWindow > broker.MaxDedupeWindow {
		return fmt.Errorf("--dedupe-window is %v: must be from 0 to %v", c.DedupeWindow, broker.MaxDedupeWindow)
	}
	if c.ShutdownHandOff < 0 || c.ShutdownHandOff >= c.ShutdownTimeout {
		return fmt.Errorf("--shutdown-handoff is %v: must be from 0 (off) to less than --shutdown-timeout (%v)", c.ShutdownHandOff, c.ShutdownTimeout)
	}
	if c.LeaderMoveDrain < 0 || c.LeaderMoveDrain > maxLeaderMoveDrain {
		return fmt.Errorf("--leader-move-drain is %v: must be from 0 (off) to %v (the controller waits behind it)", c.LeaderMoveDrain, maxLeaderMoveDrain)
	}
	if c.ForwardMoveGrace < 0 {
		return fmt.Errorf("--forward-move-grace is %v: must be 0 (at once) or positive", c.ForwardMoveGrace)
	}
	if c.NodeLapseGrace < 0 {
		return fmt.Errorf("--node-lapse-grace is %v: must be 0 (off) or positive", c.NodeLapseGrace)
	}
	if c.PubLatencyTarget < 0 {
		return fmt.Errorf("--pub-latency-target is %v: must be 0 (off) or positive", c.PubLatencyTarget)
	}
	if c.FINReadDelay < 0 {
		return fmt.Errorf("--fin-read-delay is %v: must be 0 (off) or positive", c.FINReadDelay)
	}
	if c.LeaderBalanceInterval < 0 {
		return fmt.Errorf("--leader-balance-interval is %v: must be 0 (off) or positive", c.LeaderBalanceInterval)
	}
	if c.LeaderBalanceMoves < 1 {
		return fmt.Errorf("--leader-balance-moves is %d: must be at least 1", c.LeaderBalanceMoves)
	}
	if c.GCPercent < -1 || c.GCPercent == 0 {
		return fmt.Errorf("--gc-percent is %d: must be positive, or -1 for off", c.GCPercent)
	}
	if c.DefaultPartitions < 1 || c.DefaultPartitions > 1024 {
		return fmt.Errorf("--default-partitions is %d: must be in 1..1024", c.DefaultPartitions)
	}
	if !validNodeID(c.NodeID) {
		return fmt.Errorf("--node-id %q: must be 1-64 letters, digits, '.', '_' or '-'", c.NodeID)
	}
	if c.Zone != "" && !validNodeID(c.Zone) {
		return fmt.Errorf("--zone %q: must be 1-64 letters, digits, '.', '_' or '-'", c.Zone)
	}
	if c.MaxDeflateLevel < 1 || c.MaxDeflateLevel > 9 {
		return fmt.Errorf("--max-deflate-level is %d: must be in 1..9", c.MaxDeflateLevel)
	}
	if c.MinOutputBufferTimeout > c.OutputBufferTimeout || c.OutputBufferTimeout > c.MaxOutputBufferTimeout {
		return fmt.Errorf("--output-buffer-timeout %v must lie between --min-output-buffer-timeout %v and --max-output-buffer-timeout %v",
			c.OutputBufferTimeout, c.MinOutputBufferTimeout, c.MaxOutputBufferTimeout)
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.MaxClockSkew >= c.ForwardTimeout {
		// The leader's deadline would come before the forward began.
		return fmt.Errorf("--max-clock-skew %v must be less than --forward-timeout %v", c.MaxClockSkew, c.ForwardTimeout)
	}
	if c.FINReadDelay >= c.MsgTimeout {
		// A client would see its messages time out while its FINs waited.
		return fmt.Errorf("--fin-read-delay %v must be less than --msg-timeout %v", c.FINReadDelay, c.MsgTimeout)
	}
	if c.MaxAttempts > math.MaxUint16 {
		return fmt.Errorf("--max-attempts %d is above %d", c.MaxAttempts, math.MaxUint16)
	}
	if c.MsgTimeout > c.MaxMsgTimeout {
		return fmt.Errorf("--msg-timeout %v must not exceed --max-msg-timeout %v", c.MsgTimeout, c.MaxMsgTimeout)
	}
	return nil
}

func checkHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want host:port")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

// BroadcastAddress is the host other nodes and clients are told to reach
// this node at: --broadcast-address if set, else the host of --tcp-address,
// or the hostname when that host is a wildcard that nobody can dial.
func (c Config) BroadcastAddress() string {
	if c.BroadcastAddr != "" {
		return c.BroadcastAddr
	}
	host, _, err := net.SplitHostPort(c.TCPAddress)
	if err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			return host
		}
	}
	hostname, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return hostname
}

// SlogLevel is --log-level as a slog level.
func (c Config) SlogLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// ClusterAdvertise is the replication address peers dial.
func (c Config) ClusterAdvertise(bound string) string {
	if c.ClusterBroadcastAddress != "" {
		return c.ClusterBroadcastAddress
	}
	host, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = c.BroadcastAddress()
	}
	return net.JoinHostPort(host, port)
}

// floatList is a flag of floats, comma-separated or repeated, as nsqd's
// --e2e-processing-latency-percentile; each must lie in (0, 1].
type floatList []float64

func (l *floatList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, f := range *l {
		parts[i] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func (l *floatList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		f, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || f <= 0 || f > 1 {
			return fmt.Errorf("%q is not a quantile in (0, 1]", part)
		}
		*l = append(*l, f)
	}
	return nil
}

func (l *floatList) Get() any { return []float64(*l) }

// etcdDataPath is the embedded etcd's directory.
func (c *Config) etcdDataPath() string {
	if c.EtcdDataPath != "" {
		return c.EtcdDataPath
	}
	return filepath.Join(c.DataPath, "etcd")
}
