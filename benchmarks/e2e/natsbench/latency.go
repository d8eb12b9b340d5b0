package main

import (
	"errors"
	"flag"
	"io"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/partitamq/partita/benchmarks/e2e/openloop"
)

type latencyConfig struct {
	target
	load openloop.Config
}

// latencyCommand publishes open loop, as benchmarks/e2e/latency does
// against nsqd and Partita, and times each publish from its release by the
// schedule to its PubAck.
func latencyCommand(args []string, out, errOut io.Writer) error {
	var cfg latencyConfig
	fs := flag.NewFlagSet("natsbench latency", flag.ContinueOnError)
	cfg.target.addFlags(fs)
	cfg.load.AddFlags(fs)
	err := parse(fs, args, errOut, func() error {
		if err := cfg.target.validate(); err != nil {
			return err
		}
		return cfg.load.Validate()
	})
	if err != nil {
		return err
	}
	res, err := openloop.Run(cfg.load, func(t *openloop.Tally) (openloop.Publisher, error) {
		return openPublisher(cfg.target, t)
	})
	if err != nil {
		return err
	}
	res.Print(out, cfg.load)
	if res.Acked == 0 {
		return errors.New("no publish was acknowledged")
	}
	return nil
}

// publisher is one connection publishing with PublishMsgAsync. The ack
// handlers get back the *nats.Msg that was published, so that is what
// finds a publish's release.
type publisher struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	tally   *openloop.Tally

	mu       sync.Mutex
	released map[*nats.Msg]openloop.Release
}

func openPublisher(t target, tally *openloop.Tally) (*publisher, error) {
	p := &publisher{subject: t.stream, tally: tally, released: make(map[*nats.Msg]openloop.Release)}
	var err error
	p.nc, p.js, err = connect(t.server,
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			p.answer(m, nil)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			p.answer(m, err)
		}),
		// An open loop must not stall on the client's own limit (4,000
		// by default); a server that falls behind should show as latency.
		jetstream.WithPublishAsyncMaxPending(1<<16))
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *publisher) Publish(body []byte, r openloop.Release) error {
	m := &nats.Msg{Subject: p.subject, Data: body}
	// Registered first: the ack can arrive before PublishMsgAsync returns.
	p.mu.Lock()
	p.released[m] = r
	p.mu.Unlock()
	if _, err := p.js.PublishMsgAsync(m); err != nil {
		p.mu.Lock()
		delete(p.released, m)
		p.mu.Unlock()
		return err
	}
	return nil
}

func (p *publisher) answer(m *nats.Msg, err error) {
	p.mu.Lock()
	r, ok := p.released[m]
	delete(p.released, m)
	p.mu.Unlock()
	if ok {
		p.tally.Answer(r, err)
	}
}

func (p *publisher) Close() { p.nc.Close() }
