// Command latency measures PUB latency open loop: it publishes at a fixed
// rate whatever the answers do, so a slow answer shows up as latency instead
// of quietly lowering the rate, as it would in a closed loop like
// bench_writer's.
//
//	latency --nsqd-tcp-address=127.0.0.1:4150 --topic=sub_bench --rate=10000
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(2)
	}
	res, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "latency:", err)
		os.Exit(1)
	}
	res.print(os.Stdout, cfg)
	if res.acked == 0 {
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.addr, "nsqd-tcp-address", "127.0.0.1:4150", "<addr>:<port> of the nsqd to publish to")
	fs.StringVar(&cfg.topic, "topic", "sub_bench", "topic to publish to")
	fs.Float64Var(&cfg.rate, "rate", 10000, "messages per second over all connections")
	fs.IntVar(&cfg.connections, "connections", 8, "producer connections")
	fs.IntVar(&cfg.senders, "senders", 4, "goroutines publishing on each connection, so one blocked write does not hold the schedule back")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "how long to publish")
	fs.IntVar(&cfg.size, "size", 200, "message body size in bytes")
	fs.DurationVar(&cfg.drain, "drain", 10*time.Second, "how long to wait for answers after the last publish")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cfg.validate()
}
