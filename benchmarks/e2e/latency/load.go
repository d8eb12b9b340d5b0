package main

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/nsqio/go-nsq"
	"github.com/partitamq/partita/benchmarks/e2e/openloop"
)

type config struct {
	addr  string
	topic string
	load  openloop.Config
}

func (c config) validate() error {
	switch {
	case c.addr == "":
		return errors.New("--nsqd-tcp-address is empty")
	case !nsq.IsValidTopicName(c.topic):
		return fmt.Errorf("--topic %q is not a valid topic name", c.topic)
	}
	return c.load.Validate()
}

// producer is one go-nsq connection publishing with PublishAsync.
type producer struct {
	nsq     *nsq.Producer
	topic   string
	answers chan *nsq.ProducerTransaction
}

func openProducer(cfg config, tally *openloop.Tally) (*producer, error) {
	p, err := nsq.NewProducer(cfg.addr, nsq.NewConfig())
	if err != nil {
		return nil, err
	}
	p.SetLogger(log.New(os.Stderr, "", log.LstdFlags), nsq.LogLevelError)
	// Connect now, so the first scheduled publishes do not wait for it.
	if err := p.Ping(); err != nil {
		p.Stop()
		return nil, fmt.Errorf("connecting to %s: %w", cfg.addr, err)
	}
	// The producer's router goroutine blocks while this is full, and with
	// it every publish on the connection.
	answers := make(chan *nsq.ProducerTransaction, 1<<16)
	go func() {
		for t := range answers {
			tally.Answer(t.Args[0].(openloop.Release), t.Error)
		}
	}()
	return &producer{nsq: p, topic: cfg.topic, answers: answers}, nil
}

func (p *producer) Publish(body []byte, r openloop.Release) error {
	return p.nsq.PublishAsync(p.topic, body, p.answers, r)
}

func (p *producer) Close() {
	p.nsq.Stop()
	close(p.answers)
}

// run publishes at cfg.load.Rate for cfg.load.Duration and gathers the answers.
func run(cfg config) (openloop.Result, error) {
	if err := cfg.validate(); err != nil {
		return openloop.Result{}, err
	}
	return openloop.Run(cfg.load, func(t *openloop.Tally) (openloop.Publisher, error) {
		return openProducer(cfg, t)
	})
}
