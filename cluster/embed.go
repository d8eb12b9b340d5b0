package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"google.golang.org/grpc"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// EtcdConfig describes the etcd member a node runs inside its own process.
type EtcdConfig struct {
	Name       string
	DataDir    string
	ClientAddr string // host:port clients connect to
	PeerAddr   string // host:port other members connect to
	// InitialCluster is etcd's "name=http://host:port,..." list; empty
	// means a single-member cluster made of this node alone.
	InitialCluster string
	// InitialClusterState is "new" (the default) for a member of a cluster
	// being formed, "existing" for a member added to a running cluster
	// with etcd's member add (replacing a lost member).
	InitialClusterState string
	// TickMs and ElectionMs of 0 keep etcd's defaults (100 ms and 1 s).
	TickMs, ElectionMs uint
	// TLS, if set, serves clients and peers over https and admits only
	// those with a certificate of its CA.
	TLS *EtcdTLS
}

// EtcdTLS is the certificate a node uses towards etcd, as server, peer and
// client alike, and the CA every member and client must be signed by.
type EtcdTLS struct {
	CertFile, KeyFile, CAFile string
}

func (t *EtcdTLS) info() transport.TLSInfo {
	return transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
}

// ClientConfig is the TLS configuration of an etcd client holding t's
// certificate.
func (t *EtcdTLS) ClientConfig() (*tls.Config, error) {
	info := t.info()
	return info.ClientConfig()
}

// Embedded is a running etcd member plus a client connected to it.
type Embedded struct {
	etcd      *embed.Etcd
	client    *clientv3.Client
	clientCfg clientv3.Config
	closeOnce sync.Once
	closeErr  error
}

// StartEmbedded starts an etcd member and returns once it serves requests,
// or fails when ctx ends first.
func StartEmbedded(ctx context.Context, cfg EtcdConfig) (*Embedded, error) {
	ecfg, err := embedConfig(cfg)
	if err != nil {
		return nil, err
	}
	etcd, err := embed.StartEtcd(ecfg)
	if err != nil {
		return nil, startError(cfg, err)
	}
	if err := waitReady(ctx, etcd); err != nil {
		abort(etcd)
		return nil, err
	}
	ccfg := clientv3.Config{
		Endpoints:   []string{"http://" + cfg.ClientAddr},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: ClientWindows(),
	}
	if cfg.TLS != nil {
		ccfg.Endpoints = []string{"https://" + cfg.ClientAddr}
		if ccfg.TLS, err = cfg.TLS.ClientConfig(); err != nil {
			abort(etcd)
			return nil, fmt.Errorf("embedded etcd: client tls: %w", err)
		}
	}
	client, err := clientv3.New(ccfg)
	if err != nil {
		abort(etcd)
		return nil, fmt.Errorf("embedded etcd: connect client to %s: %w", cfg.ClientAddr, err)
	}
	return &Embedded{etcd: etcd, client: client, clientCfg: ccfg}, nil
}

func embedConfig(cfg EtcdConfig) (*embed.Config, error) {
	if cfg.Name == "" {
		return nil, errors.New("embedded etcd: empty member name")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("embedded etcd: empty data dir")
	}
	clientURL, err := addrURL("client", cfg.ClientAddr)
	if err != nil {
		return nil, err
	}
	peerURL, err := addrURL("peer", cfg.PeerAddr)
	if err != nil {
		return nil, err
	}
	if cfg.TLS != nil {
		clientURL.Scheme, peerURL.Scheme = "https", "https"
	}

	ecfg := embed.NewConfig()
	ecfg.Name = cfg.Name
	ecfg.Dir = cfg.DataDir
	ecfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// The member logs nowhere, but etcd prints a slow request's whole text
	// before it hands the line to the logger: under load a failover's
	// transactions of 128 elections each run past the thresholds, and
	// node 1 spent a few percent of its CPU in the takeover printing them.
	ecfg.WarningUnaryRequestDuration = noWarning
	ecfg.WarningApplyDuration = noWarning
	// Advertise exactly what we listen on, and listen on nothing else:
	// no separate HTTP or metrics listeners.
	ecfg.ListenClientUrls = []url.URL{*clientURL}
	ecfg.AdvertiseClientUrls = []url.URL{*clientURL}
	ecfg.ListenPeerUrls = []url.URL{*peerURL}
	ecfg.AdvertisePeerUrls = []url.URL{*peerURL}
	ecfg.ListenClientHttpUrls = nil
	ecfg.ListenMetricsUrls = nil
	if cfg.TLS != nil {
		ecfg.ClientTLSInfo, ecfg.PeerTLSInfo = cfg.TLS.info(), cfg.TLS.info()
	}
	ecfg.InitialCluster = cfg.InitialCluster
	if cfg.InitialClusterState != "" {
		ecfg.ClusterState = cfg.InitialClusterState
	}
	if ecfg.InitialCluster == "" {
		ecfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	}
	if cfg.TickMs != 0 {
		ecfg.TickMs = cfg.TickMs
	}
	if cfg.ElectionMs != 0 {
		ecfg.ElectionMs = cfg.ElectionMs
	}
	// Every compare-and-swap adds a revision; without compaction the
	// backend grows for as long as the cluster lives.
	ecfg.AutoCompactionMode = embed.CompactorModePeriodic
	ecfg.AutoCompactionRetention = "1h"
	return ecfg, nil
}

// noWarning is a request duration no request reaches: the embedded
// member's slow-request warnings are never formatted.
const noWarning = 100 * 365 * 24 * time.Hour

func addrURL(role, addr string) (*url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded etcd: %s address %q: %w", role, addr, err)
	}
	if host == "" {
		return nil, fmt.Errorf("embedded etcd: %s address %q has no host; etcd advertises it to others", role, addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n <= 0 || n > 65535 {
		return nil, fmt.Errorf("embedded etcd: %s address %q needs a port in 1-65535", role, addr)
	}
	return &url.URL{Scheme: "http", Host: net.JoinHostPort(host, port)}, nil
}

// startError names the busy address, the usual reason a member fails to
// start on a developer machine.
func startError(cfg EtcdConfig, err error) error {
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("embedded etcd: %w", err)
	}
	role, addr := "client or peer", cfg.ClientAddr+" / "+cfg.PeerAddr
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Addr != nil {
		addr = opErr.Addr.String()
		switch addr {
		case cfg.ClientAddr:
			role = "client"
		case cfg.PeerAddr:
			role = "peer"
		}
	}
	return fmt.Errorf("embedded etcd: %s address %s is already in use: %w", role, addr, err)
}

func waitReady(ctx context.Context, etcd *embed.Etcd) error {
	select {
	case <-etcd.Server.ReadyNotify():
		return nil
	case <-etcd.Server.StopNotify():
		return errors.New("embedded etcd: server stopped before it was ready")
	case err := <-etcd.Err():
		return fmt.Errorf("embedded etcd: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("embedded etcd: not ready: %w", context.Cause(ctx))
	}
}

// abort stops a member that may not be ready. etcd's Close alone waits for
// the client servers, which only start once the member is ready, so it
// would block forever; stopping the server first releases them.
func abort(etcd *embed.Etcd) {
	etcd.Server.HardStop()
	etcd.Close()
}

// Client returns a client connected to this member; it is closed by Close.
func (e *Embedded) Client() *clientv3.Client {
	return e.client
}

// Close closes the client, then stops the member. It is safe to call twice.
func (e *Embedded) Close() error {
	e.closeOnce.Do(func() {
		e.closeErr = e.client.Close()
		e.etcd.Close()
	})
	return e.closeErr
}

// ClientConfig is how Client connects, for a second client with a
// connection of its own.
func (e *Embedded) ClientConfig() clientv3.Config { return e.clientCfg }

// ClientWindows are the gRPC flow-control windows of the node's etcd
// clients: 4 MiB a stream and 16 MiB a connection, instead of the 64 KiB
// gRPC starts from. A failover changes thousands of partition states in a
// second, and every node's watch carries each of them; with the default
// window the member sent a watch response or two, then waited for the
// client to read them and grant more, a round trip through two schedulers
// that on a saturated node took tens of milliseconds each, and the nodes
// heard of their elections up to 0.9 s after they were stored.
func ClientWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(4 << 20), grpc.WithInitialConnWindowSize(16 << 20)}
}
