package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type readConfig struct {
	closedLoop
	consumer string
	pull     int
}

// readCommand is bench_reader for JetStream: every connection pulls from
// the same durable consumer, up to --max-messages buffered at a time (as
// bench_reader's RDY 2500), and acks each message (its FIN).
func readCommand(args []string, out, errOut io.Writer) error {
	var cfg readConfig
	fs := flag.NewFlagSet("natsbench read", flag.ContinueOnError)
	cfg.addFlags(fs)
	fs.StringVar(&cfg.consumer, "consumer", "ch", "durable pull consumer to read from (natsbench setup makes it)")
	fs.IntVar(&cfg.pull, "max-messages", 2500, "messages each connection asks for at a time")
	err := parse(fs, args, errOut, func() error {
		switch {
		case !validName(cfg.consumer):
			return fmt.Errorf("--consumer %q is not a valid consumer name", cfg.consumer)
		case cfg.pull < 1:
			return fmt.Errorf("--max-messages %d must be at least 1", cfg.pull)
		}
		return cfg.closedLoop.validate()
	})
	if err != nil {
		return err
	}
	return runWorkers(cfg.closedLoop, func() (worker, error) {
		nc, js, err := connect(cfg.server)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
		defer cancel()
		c, err := js.Consumer(ctx, cfg.stream, cfg.consumer)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("consumer %s of stream %s: %w", cfg.consumer, cfg.stream, err)
		}
		return &reader{nc: nc, consumer: c, pull: cfg.pull}, nil
	}, out)
}

type reader struct {
	nc       *nats.Conn
	consumer jetstream.Consumer
	pull     int
}

// run acks messages until ctx is done and counts those acked by then,
// as bench_reader counts what it FINs before its deadline.
func (r *reader) run(ctx context.Context) (int64, error) {
	var (
		acked    atomic.Int64
		mu       sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	cc, err := r.consumer.Consume(func(m jetstream.Msg) {
		if err := m.Ack(); err != nil {
			fail(err)
			return
		}
		acked.Add(1)
	}, jetstream.PullMaxMessages(r.pull), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		fail(err)
	}))
	if err != nil {
		return 0, err
	}
	<-ctx.Done()
	n := acked.Load()
	mu.Lock()
	err = firstErr
	mu.Unlock()
	// Taken before stopping, so what stopping reports is not blamed on
	// the server.
	cc.Stop()
	return n, err
}

func (r *reader) close() { r.nc.Close() }
