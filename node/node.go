// Package node wires one Partita node together: embedded etcd, the actor
// system, the broker, the NSQ TCP server and the HTTP API.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/broker"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/httpapi"
	"github.com/partitamq/partita/metrics"
	"github.com/partitamq/partita/protocol"
	"github.com/partitamq/partita/replication"
	"github.com/partitamq/partita/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Version is Partita's own version, reported by /info and IDENTIFY.
const Version = "0.1.0"

// metaPrefix is where this node keeps everything in etcd.
const metaPrefix = "/partita/"

// Node is a running node.
type Node struct {
	cfg    Config
	log    *slog.Logger
	etcd   *cluster.Embedded
	client *clientv3.Client
	// leaseClient keeps the node's registration alive on a connection of
	// its own, so its renewals never queue behind watches and metadata
	// writes on the shared one.
	leaseClient *clientv3.Client
	metrics     *metrics.Metrics
	journal     *storage.Journal // nil without --journal
	states      *storage.ChannelStates
	checkpoints chan struct{} // closed when the journal's checkpoints stopped
	system      *actor.ActorSystem
	// workers run the broker's actors (package dispatch).
	workers *dispatch.Workers
	broker  *broker.Broker
	tcp     *protocol.Server
	http    *http.Server

	regMu        sync.Mutex
	reg          *cluster.Registration
	stopRegister context.CancelFunc
	repl         *replication.Server
	peers        *peers
	stopPeer     context.CancelFunc
	stopStatsd   func()

	tcpLn, httpLn, clusterLn net.Listener
	https                    *http.Server
	httpsLn                  net.Listener // nil without --https-address
	done                     chan struct{}
	closeOnce                sync.Once
	closeErr                 error
}

// Start brings a node up; every listener is bound when it returns.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Node, error) {
	n := &Node{cfg: cfg, log: log, done: make(chan struct{})}
	if err := n.start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataPath, 0o755); err != nil {
		return fmt.Errorf("data path: %w", err)
	}
	// Certificates and address ranges are read before anything starts.
	clusterTLS, err := cfg.clusterTLS()
	if err != nil {
		return err
	}
	clientTLS, err := cfg.clientTLS()
	if err != nil {
		return err
	}
	adminAllow, err := cfg.AdminAllow()
	if err != nil {
		return err
	}
	if n.tcpLn, err = net.Listen("tcp", cfg.TCPAddress); err != nil {
		return fmt.Errorf("tcp listener: %w", err)
	}
	if n.httpLn, err = net.Listen("tcp", cfg.HTTPAddress); err != nil {
		return fmt.Errorf("http listener: %w", err)
	}
	if cfg.HTTPSAddress != "" {
		if clientTLS == nil {
			return errors.New("--https-address needs --tls-cert and --tls-key")
		}
		if n.httpsLn, err = net.Listen("tcp", cfg.HTTPSAddress); err != nil {
			return fmt.Errorf("https listener: %w", err)
		}
	}
	// The cluster port is bound now so the address is owned; replication
	// traffic arrives on it once replication lands.
	if n.clusterLn, err = net.Listen("tcp", cfg.ClusterAddress); err != nil {
		return fmt.Errorf("cluster listener: %w", err)
	}
	if err := n.startEtcd(ctx); err != nil {
		return err
	}

	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	host, _ := os.Hostname()
	nodeName := cfg.NodeID
	n.workers = newWorkers()
	m := n.newMetrics()
	n.metrics = m
	if err := n.register(ctx, nodeName, host); err != nil {
		return err
	}
	replOpt := replication.Options{NodeID: nodeName, Heartbeat: cfg.ReplicaHeartbeat, DownAfter: cfg.ReplicaDownAfter, TLS: clusterTLS, Logger: n.log}
	n.peers = newPeers(replOpt)
	probe := newDeathProbe(n.client, metaPrefix, n.log)
	probe.evicted = m.PeerEvicted
	n.peers.broken = probe.sessionBroke
	pctx, cancel := context.WithCancel(context.Background())
	n.stopPeer = cancel
	go n.peers.follow(pctx, n.client, metaPrefix)
	journal, err := n.openJournal()
	if err != nil {
		return err
	}
	var osfs storage.FS = storage.OSFS{ScheduledWrites: !cfg.RawDiskWrites}
	var syncer *storage.Syncer
	if journal != nil {
		n.journal = journal
		osfs = journal.FS(osfs)
		syncer, err = storage.NewJournalSyncer(journal, cfg.SyncTimeout, m.ObserveJournalSync)
		n.checkpoints = make(chan struct{})
		go func() {
			defer close(n.checkpoints)
			journal.RunCheckpoints(pctx, cfg.JournalCheckpoint, n.checkpointed)
		}()
	} else {
		syncer, err = storage.NewSyncer(cfg.DataPath, cfg.SyncTimeout, m.ObserveSyncfs)
	}
	files := storage.NewIdleFiles(osfs)
	files.Budget = fileBudget()
	if err != nil {
		n.log.Warn("every partition fsyncs its own files by --sync-timeout", "err", err)
		syncer = nil
	} else {
		files.Syncer = syncer
		go syncer.Run(pctx)
	}
	go files.Run(pctx, cfg.FileIdleTimeout/2)
	n.states = storage.NewChannelStates(cfg.DataPath, n.journal, n.log, cfg.ChannelStateDelay)
	n.broker = broker.New(broker.Config{
		DataPath:          cfg.DataPath,
		DefaultPartitions: cfg.DefaultPartitions,
		DefaultReplicas:   cfg.DefaultReplicas,
		Storage: storage.Options{
			SegmentBytes: cfg.MaxBytesPerFile,
			SyncEvery:    cfg.SyncEvery,
			SyncTimeout:  cfg.SyncTimeout,
			OnSync:       m.ObserveFsync,
			FS:           files,
			Syncer:       syncer,
		},
		Writer: topic.WriterConfig{
			Epoch:            1, // EpochForWrite starts at 1; replication will move it
			Replicas:         1,
			ShrinkAfter:      cfg.ISRShrinkAfter,
			LagMax:           cfg.ISRLagMax,
			Window:           cfg.WriteWindow,
			MaxBatchMessages: cfg.MaxBatchMessages,
			MaxWaiting:       cfg.MaxPubWaiting,
			WriteTimeout:     cfg.WriteTimeout,
		},
		Channel: channel.Config{
			MaxOutstanding: cfg.MaxConfirmWindow,
			MaxMsgTimeout:  cfg.MaxMsgTimeout,

			ReqToEndThreshold: cfg.ReqToEndThreshold,
			E2EQuantiles:      cfg.E2EQuantiles,
			E2EWindow:         cfg.E2EWindow,
		},
		PersistEvery: cfg.ChannelPersistInterval,
		States:       n.states,
		Retention: storage.RetentionPolicy{
			MaxAge:   time.Duration(cfg.RetentionDays) * 24 * time.Hour,
			MaxBytes: cfg.RetentionBytes,
		},
		RetentionEvery:      cfg.RetentionCheck,
		Dedupe:              topic.DedupeConfig{Window: cfg.DedupeWindow, MaxEntries: cfg.DedupeMaxEntries},
		MaxChannelConsumers: cfg.MaxChannelConsumers,
		MaxAttempts:         uint16(cfg.MaxAttempts),
		MaxTopics:           cfg.MaxTopics,
		Logger:              n.log,
		ObservePublish:      m.ObservePublish,
		Admission: broker.AdmissionConfig{
			Target: cfg.PubLatencyTarget,
			Max:    cfg.MaxNodePubWaiting,
		},
		Observer:         m.Observer(),
		ActorProps:       n.onWorkers(m.ActorProps),
		NodeID:           nodeName,
		Assignments:      cluster.NewAssignments(n.client, metaPrefix),
		Etcd:             n.client,
		MetaPrefix:       metaPrefix,
		Dial:             n.peers.dialer(n.client, metaPrefix),
		OutOfReach:       n.peers.outOfReach,
		Attach:           n.peers.attach,
		FramesInFlight:   cfg.ReplicaFramesInFlight,
		ReplicaRedialMax: cfg.ReplicaRedialMax,
		ForwardTimeout:   cfg.ForwardTimeout,
		ForwardMoveGrace: cfg.ForwardMoveGrace,
		MaxClockSkew:     cfg.MaxClockSkew,
		CatchupLimit:     topic.NewCatchupLimit(cfg.CatchupRateLimit),
	}, n.system, cluster.NewMetaStore(n.client, metaPrefix))
	if err := n.broker.Open(ctx); err != nil {
		return err
	}
	checkOpenFiles(n.log, n.broker.PartitionsHeld())

	lim := n.limits()
	n.tcp = &protocol.Server{
		Broker: n.broker, Limits: lim, Logger: n.log, Connections: m.Connections,
		TLSConfig: clientTLS, TLSRequired: cfg.TLSRequiredOnTCP(), Auth: cfg.authServer(), MaxConnections: cfg.MaxConnections,
	}
	api := &httpapi.Server{
		Broker:     n.broker,
		TCP:        n.tcp,
		Limits:     lim,
		Metrics:    m.Handler(),
		AdminAllow: adminAllow,
		AdminToken: cfg.HTTPAdminToken,
		Options:    &liveOptions{cfg: cfg, level: cfg.LevelVar},
		Node: httpapi.Node{
			Version:          Version,
			Hostname:         host,
			BroadcastAddress: cfg.BroadcastAddress(),
			TCPPort:          n.tcpLn.Addr().(*net.TCPAddr).Port,
			HTTPPort:         n.httpLn.Addr().(*net.TCPAddr).Port,
			StartTime:        time.Now(),
		},
	}
	n.http = &http.Server{Handler: withProfiling(api.Handler()), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelDebug)}
	go n.tcp.Serve(n.tcpLn)
	go n.http.Serve(n.httpLn)
	if n.httpsLn != nil {
		n.https = &http.Server{Handler: n.http.Handler, TLSConfig: clientTLS.Clone(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: n.http.ErrorLog}
		go n.https.ServeTLS(n.httpsLn, "", "")
	}
	n.startStatsd()
	n.repl = replication.NewServer(n.broker, replOpt)
	go n.repl.Serve(n.clusterLn)
	ctrl := &cluster.Controller{
		Client: n.client, Prefix: metaPrefix, NodeID: nodeName,
		Assignments: cluster.NewAssignments(n.client, metaPrefix),
		LastLogIDs:  askLastLogIDs, TTL: cfg.NodeLeaseTTL, Logger: n.log,
		Observe:     func(r cluster.FailoverRound) { m.ObserveFailover(r.Elected, r.Conflicts, r.Took) },
		RepairAfter: cfg.ReplicaRepairAfter, ResignedWait: cfg.ResignedLeaderWait,
		LeaderBalanceInterval: cfg.LeaderBalanceInterval, LeaderBalanceMoves: cfg.LeaderBalanceMoves,
		ObserveLeaderMoves: m.ObserveLeaderMoves,
		MaxMoves:           cfg.MaxReplicaMoves, BalanceInterval: cfg.BalanceInterval,
		Heard: n.peers.heard, LapseGrace: cfg.NodeLapseGrace,
	}
	if cfg.LeaderMoveDrain > 0 {
		// A hold outlasts the wait, the moves' transaction and its watch
		// delivery to the old leader; it ends early when the move comes.
		hold := min(2*cfg.LeaderMoveDrain+time.Second, httpapi.MaxHandOverHold)
		ctrl.HandOver, ctrl.HandOverWait = askHandOver(hold), cfg.LeaderMoveDrain
		ctrl.ObserveHandOvers, ctrl.MovesNotStored = m.ObserveLeaderMoveDrains, tellMovesNotStored
	}
	go ctrl.Run(pctx)
	n.log.Info("partita node started", "version", Version, "tcp", n.tcpLn.Addr().String(), "http", n.httpLn.Addr().String(),
		"cluster", n.clusterLn.Addr().String(), "data", cfg.DataPath)
	return nil
}

func (n *Node) startEtcd(ctx context.Context) error {
	cfg := n.cfg
	if cfg.EtcdEndpoints != "" {
		ccfg := clientv3.Config{Endpoints: strings.Split(cfg.EtcdEndpoints, ","), DialTimeout: 5 * time.Second, Logger: nopLogger(),
			DialOptions: cluster.ClientWindows()}
		if t := cfg.etcdTLS(); t != nil {
			var err error
			if ccfg.TLS, err = t.ClientConfig(); err != nil {
				return fmt.Errorf("etcd client tls: %w", err)
			}
		}
		cli, err := clientv3.New(ccfg)
		if err != nil {
			return fmt.Errorf("etcd client: %w", err)
		}
		n.client = cli
		return n.dialLeaseClient(ccfg)
	}
	e, err := cluster.StartEmbedded(ctx, cluster.EtcdConfig{
		Name:                "partita-" + cfg.NodeID,
		DataDir:             cfg.etcdDataPath(),
		ClientAddr:          cfg.EtcdClientAddress,
		PeerAddr:            cfg.EtcdPeerAddress,
		InitialCluster:      cfg.EtcdInitialCluster,
		InitialClusterState: cfg.EtcdInitialClusterState,
		TickMs:              uint(cfg.EtcdTickMS),
		ElectionMs:          uint(cfg.EtcdElectionMS),
		TLS:                 cfg.etcdTLS(),
	})
	if err != nil {
		return err
	}
	n.etcd, n.client = e, e.Client()
	return n.dialLeaseClient(e.ClientConfig())
}

func (n *Node) dialLeaseClient(ccfg clientv3.Config) error {
	cli, err := clientv3.New(ccfg)
	if err != nil {
		return fmt.Errorf("etcd client for the node's lease: %w", err)
	}
	n.leaseClient = cli
	return nil
}

func (n *Node) limits() protocol.Limits {
	cfg := n.cfg
	lim := protocol.DefaultLimits()
	lim.MaxBodySize = cfg.MaxBodySize
	lim.MaxMsgSize = cfg.MaxMsgSize
	lim.MaxRdyCount = cfg.MaxRdyCount
	lim.MsgTimeout = cfg.MsgTimeout
	lim.MaxMsgTimeout = cfg.MaxMsgTimeout
	lim.MaxReqTimeout = cfg.MaxReqTimeout
	lim.ClientTimeout = cfg.ClientTimeout
	lim.MaxHeartbeatInterval = cfg.MaxHeartbeatInterval
	lim.OutputBufferTimeout = cfg.OutputBufferTimeout
	lim.MinOutputBufferTimeout = cfg.MinOutputBufferTimeout
	lim.MaxOutputBufferTimeout = cfg.MaxOutputBufferTimeout
	lim.MaxOutputBufferSize = cfg.MaxOutputBufferSize
	lim.FINReadDelay = cfg.FINReadDelay
	lim.MaxDeflateLevel = cfg.MaxDeflateLevel
	lim.Snappy = cfg.Snappy
	lim.Deflate = cfg.Deflate
	lim.Version = Version
	lim.TLSAvailable = cfg.TLSCert != ""
	lim.AuthRequired = cfg.AuthHTTPAddress != ""
	return lim
}

// TCPAddr and HTTPAddr are the bound listener addresses.
func (n *Node) TCPAddr() string  { return n.tcpLn.Addr().String() }
func (n *Node) HTTPAddr() string { return n.httpLn.Addr().String() }

// Close shuts down in order: stop accepting, end client sessions, stop the
// partitions (they persist channel offsets and fsync), then etcd. Calling it
// again returns the first call's result.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

// shutdownHTTP lets srv finish its requests for up to 5 s, or closes ln
// when srv never started.
func shutdownHTTP(srv *http.Server, ln net.Listener) error {
	if srv == nil {
		if ln != nil {
			ln.Close()
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return ignoreClosed(srv.Shutdown(ctx))
}

func (n *Node) close() error {
	var errs []error
	n.leave()
	// A closing node's peers evict it once its ports close; it must not
	// then register again.
	if n.stopRegister != nil {
		n.stopRegister()
	}
	if n.stopStatsd != nil {
		n.stopStatsd()
	}
	if n.tcp != nil {
		n.tcp.Close()
	} else if n.tcpLn != nil {
		n.tcpLn.Close()
	}
	errs = append(errs, shutdownHTTP(n.http, n.httpLn), shutdownHTTP(n.https, n.httpsLn))
	if n.repl != nil {
		n.repl.Stop()
	} else if n.clusterLn != nil {
		n.clusterLn.Close()
	}
	if n.broker != nil {
		n.broker.Close()
	}
	// The channels stopped with the broker; what they saved last is
	// written now.
	errs = append(errs, n.states.Close())
	if n.stopPeer != nil {
		n.stopPeer()
	}
	if n.journal != nil {
		<-n.checkpoints // a checkpoint under way ends first
		errs = append(errs, n.journal.Close())
	}
	if n.peers != nil {
		n.peers.close()
	}
	n.regMu.Lock()
	if n.reg != nil {
		errs = append(errs, n.reg.Close())
	}
	n.regMu.Unlock()
	if n.leaseClient != nil {
		n.leaseClient.Close()
	}
	if n.system != nil {
		n.system.Shutdown()
	}
	if n.workers != nil {
		n.workers.Stop()
	}
	if n.etcd != nil {
		errs = append(errs, n.etcd.Close())
	} else if n.client != nil {
		errs = append(errs, n.client.Close())
	}
	return errors.Join(errs...)
}

// withProfiling serves Go's profiler under /debug/pprof/, as nsqd does.
func withProfiling(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.Handle("/", api)
	return mux
}

func ignoreClosed(err error) error {
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

func nopLogger() *zap.Logger { return zap.NewNop() }

// onWorkers runs every actor the broker spawns on one pool of warm
// goroutines (package dispatch), beside the metrics options. At most
// actorWorkersPerCPU a core run at once: a burst of work for thousands of
// actors queues there rather than in Go's scheduler, ahead of the lease
// renewals and heartbeats.
func (n *Node) onWorkers(props func(kind string) []actor.PropsOption) func(kind string) []actor.PropsOption {
	return func(kind string) []actor.PropsOption {
		return append(props(kind), actor.WithDispatcher(n.workers))
	}
}

func newWorkers() *dispatch.Workers {
	procs := runtime.GOMAXPROCS(0)
	return dispatch.NewBounded(actorThroughput, 4*procs, actorWorkersPerCPU*procs, actorQueueStall)
}

// actorWorkersPerCPU bounds the actor runs under way at once, per core;
// a queue of runs that has not moved for actorQueueStall (runs blocked on
// a disk) gets one more.
const (
	actorWorkersPerCPU = 8
	actorQueueStall    = 10 * time.Millisecond
)

// actorThroughput is protoactor's default: messages a mailbox handles
// before it lets other actors run.
const actorThroughput = 300
