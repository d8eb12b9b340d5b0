package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type writeConfig struct {
	closedLoop
	batch int
}

// writeCommand is bench_writer's loop for JetStream: batch 1 is a
// synchronous Publish waiting for its PubAck; a batch of n is n async
// publishes, then a wait for all n PubAcks (JetStream has no MPUB).
func writeCommand(args []string, out, errOut io.Writer) error {
	var cfg writeConfig
	fs := flag.NewFlagSet("natsbench write", flag.ContinueOnError)
	cfg.addFlags(fs)
	fs.IntVar(&cfg.batch, "batch-size", 200, "messages published before waiting for their acks")
	err := parse(fs, args, errOut, func() error {
		if cfg.batch < 1 {
			return fmt.Errorf("--batch-size %d must be at least 1", cfg.batch)
		}
		return cfg.closedLoop.validate()
	})
	if err != nil {
		return err
	}
	body := make([]byte, cfg.size)
	return runWorkers(cfg.closedLoop, func() (worker, error) {
		nc, js, err := connect(cfg.server, jetstream.WithPublishAsyncMaxPending(max(cfg.batch, 4000)))
		if err != nil {
			return nil, err
		}
		return &writer{nc: nc, js: js, subject: cfg.stream, body: body, batch: cfg.batch}, nil
	}, out)
}

type writer struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	subject string
	body    []byte
	batch   int
}

// run publishes batches until ctx is done; like bench_writer it checks
// the clock only between batches and counts only acknowledged ones.
func (w *writer) run(ctx context.Context) (int64, error) {
	futures := make([]jetstream.PubAckFuture, 0, w.batch)
	var n int64
	for ctx.Err() == nil {
		if w.batch == 1 {
			if err := w.publishOne(); err != nil {
				return n, err
			}
			n++
			continue
		}
		futures = futures[:0]
		for range w.batch {
			f, err := w.js.PublishAsync(w.subject, w.body)
			if err != nil {
				return n, err
			}
			futures = append(futures, f)
		}
		for _, f := range futures {
			if err := await(f); err != nil {
				return n, err
			}
		}
		n += int64(w.batch)
	}
	return n, nil
}

// ackTimeout bounds a wait for one PubAck, so a stuck server fails the
// run instead of hanging it.
const ackTimeout = 30 * time.Second

func (w *writer) publishOne() error {
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	_, err := w.js.Publish(ctx, w.subject, w.body)
	return err
}

func await(f jetstream.PubAckFuture) error {
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return err
	case <-time.After(ackTimeout):
		return errors.New("no PubAck within " + ackTimeout.String())
	}
}

func (w *writer) close() { w.nc.Close() }
