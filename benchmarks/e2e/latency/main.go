// Command latency measures PUB latency open loop against nsqd or a Partita
// node: it publishes at a fixed rate whatever the answers do, so a slow
// answer shows up as latency instead of quietly lowering the rate, as it
// would in a closed loop like bench_writer's.
//
//	latency --nsqd-tcp-address=127.0.0.1:4150 --topic=sub_bench --rate=10000
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
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
	res.Print(os.Stdout, cfg.load)
	if res.Acked == 0 {
		os.Exit(1)
	}
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("latency", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.addr, "nsqd-tcp-address", "127.0.0.1:4150", "<addr>:<port> of the nsqd to publish to")
	fs.StringVar(&cfg.topic, "topic", "sub_bench", "topic to publish to")
	cfg.load.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return cfg, cfg.validate()
}
