package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// --system=nats3 measures a three-server NATS JetStream cluster the way the
// Partita cluster is measured, so that a knee at N partitions can be set
// beside JetStream's at N streams: N streams of --replicas replicas on file
// storage, one subject each (its name, as a Partita topic), and the same
// open-loop load, publishing to each stream on a connection to its
// leader's server as the Partita load does to each partition's leader.

const (
	sysPartita = "partita"
	sysNATS    = "nats3"
)

// systemName is what the report calls each system.
var systemName = map[string]string{sysPartita: "Partita", sysNATS: "NATS JetStream"}

// startNATS starts three nats-servers clustered on loopback, JetStream on
// with a store of its own each under dir, the rest at nats-server's
// defaults as run.sh's nats3 has them, and returns once every server's
// /healthz answers (it waits for JetStream's meta leader). The profiling
// port serves the goroutine count the idle figures read; its block
// profile stays off (prof_block_rate 0), so it costs nothing meanwhile.
func startNATS(ctx context.Context, bin, dir string) (*cluster, error) {
	// Client, route, monitoring and profiling port of each server.
	ports, err := freePorts(12)
	if err != nil {
		return nil, err
	}
	var routes []string
	for i := range 3 {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i*4+1]))
	}
	c := &cluster{system: sysNATS}
	for i := 1; i <= 3; i++ {
		p := ports[(i-1)*4:]
		n := &node{
			idx:   i,
			tcp:   fmt.Sprintf("127.0.0.1:%d", p[0]),
			peer:  fmt.Sprintf("127.0.0.1:%d", p[1]),
			http:  fmt.Sprintf("127.0.0.1:%d", p[2]),
			pprof: fmt.Sprintf("127.0.0.1:%d", p[3]),
			log:   filepath.Join(dir, fmt.Sprintf("node%d.log", i)),
		}
		conf := filepath.Join(dir, fmt.Sprintf("n%d.conf", i))
		text := fmt.Sprintf("server_name: n%d\nlisten: %q\nhttp: %q\nprof_port: %d\nprof_block_rate: 0\n"+
			"jetstream { store_dir: %q }\ncluster { name: scale, listen: %q, routes: [%s] }\n",
			i, n.tcp, n.http, p[3], filepath.Join(dir, fmt.Sprintf("data%d", i)), n.peer, strings.Join(routes, ", "))
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			c.stop(10 * time.Second)
			return nil, err
		}
		// Every server must be up before any can elect a meta leader, so
		// all three start before the first is waited for.
		if err := n.start(bin, []string{"-c", conf}); err != nil {
			c.stop(10 * time.Second)
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		if err := n.waitReady(ctx, "/healthz", "", 90*time.Second); err != nil {
			c.stop(10 * time.Second)
			return nil, err
		}
	}
	return c, nil
}

// natsVersion is the server's own account of its version, for the report.
func natsVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return ""
	}
	_, v, _ := strings.Cut(strings.TrimSpace(string(out)), ": ")
	return v
}

// jsConnect opens a client connection with JetStream on it; it does not
// reconnect, so a server that is gone shows as errors.
func jsConnect(n *node, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect("nats://"+n.tcp, nats.Name("partita scale"), nats.Timeout(5*time.Second), nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// createStreams creates streams scale_00000… of cfg.replicas replicas on
// file storage until target exist, cfg.createParallel requests at a time,
// stream k through server k mod 3 (JetStream's meta leader handles each,
// whichever server takes it). It returns the streams whose create
// succeeded.
func createStreams(ctx context.Context, c *cluster, cfg config, target int, res *runResult) []topic {
	jss := make([]jetstream.JetStream, len(c.nodes))
	for i, n := range c.nodes {
		nc, js, err := jsConnect(n, jetstream.WithDefaultTimeout(time.Minute))
		if err != nil {
			res.Create.Topics, res.Create.NotTried = target, target
			res.Create.FirstError = fmt.Sprintf("connecting to server %d: %v", n.idx, err)
			return nil
		}
		defer nc.Close()
		jss[i] = js
	}
	return createAll(ctx, cfg, target, res, func(ctx context.Context, i int) (topic, error) {
		name := topicName(i)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		_, err := jss[i%len(jss)].CreateStream(ctx, jetstream.StreamConfig{
			Name:     name,
			Subjects: []string{name},
			Storage:  jetstream.FileStorage,
			Replicas: cfg.replicas,
		})
		return topic{name: name, partitions: 1}, err
	})
}

// streamLeaders asks JetStream (through server 1) which server leads each
// of streams; a stream it did not report a leader for has leader 0.
func streamLeaders(ctx context.Context, c *cluster, streams []topic) ([]partition, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	byName := map[string]int{}
	for _, n := range c.nodes {
		byName[fmt.Sprintf("n%d", n.idx)] = n.idx
	}
	out := make([]partition, len(streams))
	at := make(map[string]int, len(streams))
	for i, s := range streams {
		out[i] = partition{topic: s.name}
		at[s.name] = i
	}
	nc, js, err := jsConnect(c.nodes[0], jetstream.WithDefaultTimeout(30*time.Second))
	if err != nil {
		return out, err
	}
	defer nc.Close()
	list := js.ListStreams(ctx)
	for info := range list.Info() {
		i, ok := at[info.Config.Name]
		if ok && info.Cluster != nil {
			out[i].leader = byName[info.Cluster.Leader]
		}
	}
	return out, list.Err()
}

// jsProducer is one client connection of a JetStream load. Each stream's
// leader acks on its own, so acks come back in any order; the due time of
// each publish waits by its message, which the ack handlers get back.
type jsProducer struct {
	lc         *loadConn
	nc         *nats.Conn
	js         jetstream.JetStream
	ackTimeout time.Duration

	mu  sync.Mutex
	due map[*nats.Msg]time.Time
}

// dialJSProducer connects lc to server n. A publish not acked within
// ackTimeout is an error (the client gives up on it), so that a lost ack
// counts as one rather than waiting for the drain.
func dialJSProducer(n *node, lc *loadConn, ackTimeout time.Duration) (*jsProducer, error) {
	p := &jsProducer{lc: lc, ackTimeout: ackTimeout, due: make(map[*nats.Msg]time.Time)}
	var err error
	p.nc, p.js, err = jsConnect(n,
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			p.answer(m, nil)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.answer(m, err)
		}),
		// An open loop must not stall on the client's own bound on
		// unacked publishes (4,000 by default): a server that falls
		// behind should show as latency.
		jetstream.WithPublishAsyncMaxPending(1<<16),
		jetstream.WithPublishAsyncTimeout(ackTimeout))
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *jsProducer) publish(pd pending, body []byte, _ bool) error {
	m := &nats.Msg{Subject: pd.dst.topic, Data: body}
	// Kept first: the ack can come before PublishMsgAsync returns.
	p.mu.Lock()
	p.due[m] = pd.due
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.mu.Lock()
		delete(p.due, m)
		p.mu.Unlock()
		if p.nc.IsClosed() {
			return err
		}
		// Refused by the client itself (too many unacked publishes for
		// too long): this one is lost, the connection goes on.
		p.lc.note(pd.due, 0, outLost, "publish: "+err.Error())
	}
	return nil
}

func (p *jsProducer) answer(m *nats.Msg, err error) {
	p.mu.Lock()
	due, ok := p.due[m]
	delete(p.due, m)
	p.mu.Unlock()
	if !ok {
		return
	}
	wait := time.Since(due)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, jetstream.ErrAsyncPublishTimeout) {
			msg = fmt.Sprintf("no ack within %v", p.ackTimeout)
		}
		p.lc.note(due, wait, outError, msg)
		return
	}
	p.lc.note(due, wait, outAcked, "")
}

// flush has nothing to do: the client flushes its own buffer as soon as
// it can.
func (p *jsProducer) flush() {}

func (p *jsProducer) close() { p.nc.Close() }

// probeJS is probe for JetStream: a publish to each of lost (each a
// stream) through each of survivors, every cfg.failoverRetry, until each
// has been acked through every survivor or cfg.failoverTimeout has passed
// since the kill. A server routes a publish to the stream's leader
// wherever it is, as a Partita node forwards a PUB, so a stream is back
// once it is acked through both survivors. Each worker sends its whole
// share in a pass and waits for every answer before the next. A stream
// between leaders may answer nothing: its publish fails when
// cfg.failoverAckWait passes, which therefore bounds how soon a stream
// that came back is seen to.
func probeJS(ctx context.Context, survivors []*node, lost []*partition, cfg config, b *probeBook) {
	body := []byte("failover probe")
	deadline := b.killedAt.Add(cfg.failoverTimeout)
	var wg sync.WaitGroup
	for v, via := range survivors {
		for _, share := range probeShares(len(lost), len(survivors), cfg) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var nc *nats.Conn
				var js jetstream.JetStream
				defer func() {
					if nc != nil {
						nc.Close()
					}
				}()
				for len(share) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
					passStart := time.Now()
					if nc == nil || nc.IsClosed() {
						var err error
						nc, js, err = jsConnect(via, jetstream.WithPublishAsyncTimeout(cfg.failoverAckWait), jetstream.WithPublishAsyncMaxPending(1<<16))
						if err != nil {
							nc = nil
							b.noteErr(err.Error())
							pause(ctx, cfg.failoverRetry)
							continue
						}
					}
					share = probeJSPass(js, v, share, lost, body, b)
					if len(share) > 0 {
						pause(ctx, max(0, cfg.failoverRetry-time.Since(passStart)))
					}
				}
			}()
		}
	}
	wg.Wait()
}

// probeJSPass publishes once to each stream of share through survivors[v]
// and returns those not acked.
func probeJSPass(js jetstream.JetStream, v int, share []int, lost []*partition, body []byte, b *probeBook) (left []int) {
	sent := b.since()
	futures := make([]jetstream.PubAckFuture, len(share))
	for k, i := range share {
		fut, err := js.PublishMsgAsync(&nats.Msg{Subject: lost[i].topic, Data: body})
		if err != nil {
			b.refuse(i, v, jsRefusal(err))
			continue
		}
		futures[k] = fut
	}
	b.attempts.Add(int64(len(share)))
	for k, i := range share {
		fut := futures[k]
		if fut == nil {
			left = append(left, i)
			continue
		}
		select {
		case <-fut.Ok():
			b.ok(i, v, sent)
		case err := <-fut.Err():
			b.refuse(i, v, jsRefusal(err))
			left = append(left, i)
		}
	}
	return left
}

// jsRefusal names a failed publish by a first word that groups it, as an
// NSQ error frame's code does, then the client's text.
func jsRefusal(err error) string {
	var api *jetstream.APIError
	code := "other"
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		code = "no_responders"
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		code = "no_stream_response"
	case errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		code = "timeout"
	case errors.Is(err, nats.ErrConnectionClosed):
		code = "closed"
	case errors.As(err, &api):
		code = fmt.Sprintf("api_%d", api.ErrorCode)
	}
	return code + " " + err.Error()
}
