package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

type setupConfig struct {
	servers       []string
	stream        string
	consumer      string
	replicas      int
	maxAckPending int
	timeout       time.Duration
}

// setupCommand makes the file-storage stream and the durable consumer the
// workloads use, puts the consumer's leader on the stream's leader (as a
// Partita channel lives with its partition's leader), and prints
// "leader <server name> <url>" for the clients to connect to.
func setupCommand(args []string, out, errOut io.Writer) error {
	var cfg setupConfig
	var servers string
	fs := flag.NewFlagSet("natsbench setup", flag.ContinueOnError)
	fs.StringVar(&servers, "servers", nats.DefaultURL, "comma-separated URLs of every server of the cluster")
	fs.StringVar(&cfg.stream, "stream", "sub_bench", "stream to create; also its subject")
	fs.StringVar(&cfg.consumer, "consumer", "ch", "durable pull consumer to create")
	fs.IntVar(&cfg.replicas, "replicas", 3, "replicas of the stream and the consumer")
	// bench_reader's RDY 2500 on each of its GOMAXPROCS connections.
	fs.IntVar(&cfg.maxAckPending, "max-ack-pending", 2500*runtime.GOMAXPROCS(0), "unacknowledged messages the consumer allows")
	fs.DurationVar(&cfg.timeout, "timeout", time.Minute, "how long the cluster may take to be ready")
	err := parse(fs, args, errOut, func() error {
		for s := range strings.SplitSeq(servers, ",") {
			if s = strings.TrimSpace(s); s != "" {
				cfg.servers = append(cfg.servers, s)
			}
		}
		switch {
		case len(cfg.servers) == 0:
			return errors.New("--servers is empty")
		case !validName(cfg.stream):
			return fmt.Errorf("--stream %q is not a valid stream name", cfg.stream)
		case !validName(cfg.consumer):
			return fmt.Errorf("--consumer %q is not a valid consumer name", cfg.consumer)
		case cfg.replicas < 1:
			return fmt.Errorf("--replicas %d must be at least 1", cfg.replicas)
		case cfg.maxAckPending < 1:
			return fmt.Errorf("--max-ack-pending %d must be at least 1", cfg.maxAckPending)
		case cfg.timeout <= 0:
			return fmt.Errorf("--timeout %v must be positive", cfg.timeout)
		}
		return nil
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	name, url, err := setup(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "leader %s %s\n", name, url)
	return nil
}

// retryEvery is how often setup asks again while the cluster is still
// electing its leaders.
const retryEvery = 200 * time.Millisecond

func setup(ctx context.Context, cfg setupConfig) (leaderName, leaderURL string, err error) {
	names, err := serverNames(cfg.servers)
	if err != nil {
		return "", "", err
	}
	nc, js, err := connect(cfg.servers[0])
	if err != nil {
		return "", "", err
	}
	defer nc.Close()

	streamCfg := jetstream.StreamConfig{
		Name:     cfg.stream,
		Subjects: []string{cfg.stream},
		Storage:  jetstream.FileStorage,
		Replicas: cfg.replicas,
	}
	// A fresh cluster answers "JetStream system temporarily unavailable"
	// until its meta group has a leader.
	stream, err := retry(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, streamCfg)
	})
	if err != nil {
		return "", "", fmt.Errorf("creating stream %s: %w", cfg.stream, err)
	}
	leaderName, err = retry(ctx, func(ctx context.Context) (string, error) {
		info, err := stream.Info(ctx)
		if err != nil {
			return "", err
		}
		return readyLeader(info.Cluster, cfg.replicas)
	})
	if err != nil {
		return "", "", fmt.Errorf("stream %s has no leader with current replicas: %w", cfg.stream, err)
	}
	leaderURL, ok := names[leaderName]
	if !ok {
		return "", "", fmt.Errorf("stream leader %q is none of --servers (%v)", leaderName, names)
	}

	consumerCfg := jetstream.ConsumerConfig{
		Durable:       cfg.consumer,
		AckPolicy:     jetstream.AckExplicitPolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		MaxAckPending: cfg.maxAckPending,
	}
	consumer, err := retry(ctx, func(ctx context.Context) (jetstream.Consumer, error) {
		return stream.CreateOrUpdateConsumer(ctx, consumerCfg)
	})
	if err != nil {
		return "", "", fmt.Errorf("creating consumer %s: %w", cfg.consumer, err)
	}
	if _, err := retry(ctx, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, moveConsumerLeader(ctx, nc, consumer, cfg, leaderName)
	}); err != nil {
		return "", "", fmt.Errorf("moving consumer %s's leader to %s: %w", cfg.consumer, leaderName, err)
	}
	return leaderName, leaderURL, nil
}

// serverNames maps each server's name, which is what JetStream names
// leaders by, to its URL.
func serverNames(urls []string) (map[string]string, error) {
	names := make(map[string]string, len(urls))
	for _, u := range urls {
		nc, err := nats.Connect(u, nats.Name("natsbench setup"), nats.Timeout(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("connecting to %s: %w", u, err)
		}
		names[nc.ConnectedServerName()] = u
		nc.Close()
	}
	return names, nil
}

// readyLeader is the group's leader once it has one and all its replicas
// are caught up, so the first workload does not measure the followers'
// start.
func readyLeader(c *jetstream.ClusterInfo, replicas int) (string, error) {
	switch {
	case c == nil || c.Leader == "":
		return "", errors.New("no leader yet")
	case len(c.Replicas) != replicas-1:
		return "", fmt.Errorf("%d followers, want %d", len(c.Replicas), replicas-1)
	}
	for _, p := range c.Replicas {
		if !p.Current || p.Offline {
			return "", fmt.Errorf("follower %s not current", p.Name)
		}
	}
	return c.Leader, nil
}

// moveConsumerLeader returns nil once the consumer's leader is leader, and
// otherwise asks the current one to step down in its favour and returns
// an error so the caller asks again.
func moveConsumerLeader(ctx context.Context, nc *nats.Conn, c jetstream.Consumer, cfg setupConfig, leader string) error {
	if cfg.replicas == 1 {
		// A one-replica consumer is placed on its stream's server, and a
		// server outside a cluster reports no leader for it.
		return nil
	}
	info, err := c.Info(ctx)
	if err != nil {
		return err
	}
	current, err := readyLeader(info.Cluster, cfg.replicas)
	if err != nil || current == leader {
		return err
	}
	req, err := json.Marshal(map[string]any{"placement": map[string]string{"preferred": leader}})
	if err != nil {
		return err
	}
	subject := fmt.Sprintf("$JS.API.CONSUMER.LEADER.STEPDOWN.%s.%s", cfg.stream, cfg.consumer)
	resp, err := nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return err
	}
	var answer struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &answer); err != nil {
		return fmt.Errorf("step-down answer %q: %w", resp.Data, err)
	}
	if answer.Error != nil {
		return fmt.Errorf("step-down refused: %s", answer.Error.Description)
	}
	return fmt.Errorf("leader was %s; asked it to step down", current)
}

// retry calls f until it succeeds or ctx ends, and then returns f's last
// error with ctx's.
func retry[T any](ctx context.Context, f func(context.Context) (T, error)) (T, error) {
	for {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		v, err := f(callCtx)
		cancel()
		if err == nil {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%w (%w)", err, ctx.Err())
		case <-time.After(retryEvery):
		}
	}
}
