// Command natsbench drives a NATS JetStream stream with the workloads
// benchmarks/e2e/run.sh runs against nsqd and Partita, and prints its
// figures in the same lines as bench_writer, bench_reader and latency, so
// run.sh reads every system's results the same way.
//
//	natsbench setup   --servers=nats://127.0.0.1:4222,... # stream, consumer; prints the leader
//	natsbench latency --server=nats://127.0.0.1:4222     # open-loop publishes, latency to PubAck
//	natsbench write   --server=... --batch-size=200      # publish, wait for the PubAcks, repeat
//	natsbench read    --server=...                       # pull consumer, ack each message
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the exit status: 2 for bad usage,
// 1 for a failed run.
func run(args []string, out, errOut io.Writer) int {
	commands := map[string]func([]string, io.Writer, io.Writer) error{
		"setup":   setupCommand,
		"latency": latencyCommand,
		"write":   writeCommand,
		"read":    readCommand,
	}
	if len(args) == 0 || commands[args[0]] == nil {
		fmt.Fprintln(errOut, "usage: natsbench setup|latency|write|read [flags] (-h for each command's flags)")
		return 2
	}
	err := commands[args[0]](args[1:], out, errOut)
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(errOut, "natsbench %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(errOut, "natsbench %s: %v\n", args[0], err)
		return 1
	}
}

// usageError is a bad command line, as opposed to a run that failed.
type usageError struct{ error }

// parse parses args with fs and checks them with validate.
func parse(fs *flag.FlagSet, args []string, errOut io.Writer, validate func() error) error {
	fs.SetOutput(errOut)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	if err := validate(); err != nil {
		return usageError{err}
	}
	return nil
}
