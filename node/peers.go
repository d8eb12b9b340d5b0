package node

import (
	"context"
	"fmt"
	"sync"

	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/replication"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// peers is the node's address book of the other nodes, from their etcd
// registrations, and one replication.Conn per peer address: the session
// that carries every partition this node leads and that peer follows.
type peers struct {
	opt replication.Options
	// broken hears of each session to a peer that broke.
	broken func(node string, cause error)

	mu    sync.Mutex
	addrs map[string]string // node ID → cluster address
	conns map[string]*replication.Conn
}

func newPeers(opt replication.Options) *peers {
	return &peers{opt: opt, addrs: map[string]string{}, conns: map[string]*replication.Conn{}}
}

// follow keeps the address book current until ctx ends.
func (p *peers) follow(ctx context.Context, cli *clientv3.Client, prefix string) {
	for nodes := range cluster.WatchNodes(ctx, cli, prefix) {
		p.mu.Lock()
		for _, n := range nodes {
			p.addrs[n.ID] = n.ClusterAddress
		}
		p.mu.Unlock()
	}
}

func (p *peers) known(ctx context.Context, cli *clientv3.Client, prefix, node string) string {
	p.mu.Lock()
	addr := p.addrs[node]
	p.mu.Unlock()
	if addr != "" {
		return addr
	}
	nodes, err := cluster.Nodes(ctx, cli, prefix)
	if err != nil {
		return ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, n := range nodes {
		p.addrs[n.ID] = n.ClusterAddress
	}
	return p.addrs[node]
}

// dialer opens replica actors' streams on the sessions to their followers.
func (p *peers) dialer(cli *clientv3.Client, prefix string) replica.Dialer {
	return func(ctx context.Context, node string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) (replica.Link, error) {
		addr := p.known(ctx, cli, prefix, node)
		if addr == "" {
			return nil, fmt.Errorf("node %s is not registered", node)
		}
		conn, err := p.conn(node, addr)
		if err != nil {
			return nil, err
		}
		return replication.Open(ctx, conn, p.opt, onFrame, onDown)
	}
}

// connOf is the connection to node's address; nil for one never dialled.
func (p *peers) connOf(node string) *replication.Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[p.addrs[node]]
}

// attach opens a stream on the session to node when one is up now
// (replication.OpenUp); nil otherwise, and for a node not in the address
// book, which the dialer looks up.
func (p *peers) attach(ctx context.Context, node string, onFrame func(*messages.FollowerFrame, bool), onDown func(error)) replica.Link {
	c := p.connOf(node)
	if s := replication.OpenUp(ctx, c, onFrame, onDown); s != nil {
		return s
	}
	return nil
}

// outOfReach reports a node whose session is known down (Conn.OutOfReach);
// nil for one never dialled.
func (p *peers) outOfReach(node string) replica.Unreachable {
	c := p.connOf(node)
	if c == nil {
		return nil
	}
	if u := c.OutOfReach(p.opt); u != nil {
		return u
	}
	return nil
}

// heard reports whether this node's replication session to node is up;
// the address book keeps a node's address after its registration lapses.
func (p *peers) heard(node string) bool {
	c := p.connOf(node)
	return c != nil && c.Up()
}

func (p *peers) conn(node, addr string) (*replication.Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := replication.DialTLS(addr, p.opt.TLS)
	if err != nil {
		return nil, err
	}
	if p.broken != nil {
		c.OnBroken(func(cause error) { p.broken(node, cause) })
	}
	p.conns[addr] = c
	return c, nil
}

func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, c := range p.conns {
		c.Close()
		delete(p.conns, addr)
	}
}

// Offsets ride on the sessions' next writes (replica.LaterLink).
var _ replica.LaterLink = (*replication.Stream)(nil)
