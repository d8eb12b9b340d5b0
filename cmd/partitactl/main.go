// Command partitactl runs a Partita cluster's operations through any
// node's HTTP API: it lists nodes and partitions as tables, creates and
// expands topics, moves leaders and replicas, changes replica counts,
// drains nodes and marks rolling upgrades, and follows the long ones until
// they end.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Exit codes: a refusal or failure, a usage error, a wait --timeout ended.
const (
	exitFailed   = 1
	exitUsage    = 2
	exitTimedOut = 3
)

const defaultNode = "127.0.0.1:4151"

// cli is one run of the command: where it writes and what it was given.
type cli struct {
	out, errOut io.Writer
	tty         bool // out is a terminal: draw a bar in place
	getenv      func(string) string
	g           globals
}

// globals are the flags every command takes, before or after its name.
type globals struct {
	node    string
	bind    string
	token   string
	request time.Duration
}

// command is one of partitactl's verbs.
type command struct {
	name, usage, summary string
	run                  func(c *cli, args []string) error
}

func commands() []command {
	return []command{
		{"nodes", "", "list the nodes: address, zone, replicas held, leaderships, drain state", runNodes},
		{"topic", "TOPIC", "list a topic's partitions: leader, preferred replica, ISR, catching up, move under way", runTopic},
		{"create", "TOPIC --partitions N --replicas R [--ordered]", "create a topic", runCreate},
		{"expand", "TOPIC N", "grow a topic to N partitions", runExpand},
		{"move-leader", "TOPIC PARTITION [--to NODE]", "hand a partition's leadership to an ISR member", runMoveLeader},
		{"move", "TOPIC PARTITION --from NODE --to NODE", "move a replica to another node and follow it", runMove},
		{"replicas", "TOPIC R", "change a topic's replica count and follow it", runReplicas},
		{"drain", "NODE", "move every replica off a node and follow it until removable", runDrain},
		{"cluster", "", "show the cluster's health: stable, upgrade mode, nodes gone, partitions lacking a leader or replicas", runCluster},
		{"upgrade", "begin|done", "begin or end a rolling upgrade: replica repair and the balances wait until done", runUpgrade},
	}
}

func main() {
	fi, err := os.Stdout.Stat()
	tty := err == nil && fi.Mode()&os.ModeCharDevice != 0
	c := &cli{out: os.Stdout, errOut: os.Stderr, tty: tty, getenv: os.Getenv}
	os.Exit(c.main(os.Args[1:]))
}

// main runs args and returns the exit code.
func (c *cli) main(args []string) int {
	c.g = globals{node: defaultNode, bind: c.getenv("PARTITACTL_BIND"), token: c.getenv("PARTITACTL_TOKEN"), request: 15 * time.Second}
	if v := c.getenv("PARTITACTL_NODE"); v != "" {
		c.g.node = v
	}
	fs := c.flagSet("partitactl", "<command> [arguments]")
	if err := fs.Parse(args); err != nil {
		return c.usageExit(err)
	}
	if fs.NArg() == 0 || fs.Arg(0) == "help" {
		if fs.NArg() > 1 {
			return c.main([]string{fs.Arg(1), "-h"})
		}
		c.help(c.out)
		return 0
	}
	for _, cmd := range commands() {
		if cmd.name == fs.Arg(0) {
			return c.exit(cmd.run(c, fs.Args()[1:]))
		}
	}
	fmt.Fprintf(c.errOut, "partitactl: unknown command %q\n", fs.Arg(0))
	c.help(c.errOut)
	return exitUsage
}

// usageError is a command line partitactl cannot run.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func (c *cli) exit(err error) int {
	var ue usageError
	var ref *refusal
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(c.errOut, "partitactl:", err)
		return exitUsage
	case errors.As(err, &ref):
		fmt.Fprintf(c.errOut, "partitactl: refused: %d %s (asked %s)\n", ref.Status, ref.Message, ref.Node)
		return exitFailed
	case errors.Is(err, errTimedOut):
		fmt.Fprintln(c.errOut, "partitactl:", err)
		return exitTimedOut
	default:
		fmt.Fprintln(c.errOut, "partitactl:", err)
		return exitFailed
	}
}

func (c *cli) usageExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return exitUsage
}

func (c *cli) help(w io.Writer) {
	fmt.Fprintln(w, "partitactl runs a Partita cluster's operations through any node's HTTP API.")
	fmt.Fprintln(w, "\nUsage: partitactl [--node HOST:PORT,...] <command> [arguments]\n\nCommands:")
	for _, cmd := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", cmd.name, cmd.summary)
	}
	fmt.Fprintln(w, "\nRun 'partitactl <command> -h' for a command's arguments and flags.")
	fmt.Fprintln(w, "Exit status: 0 done, 1 refused or failed, 2 usage, 3 --timeout reached.")
}

// flagSet is a command's flags, the global ones among them.
func (c *cli) flagSet(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	fs.StringVar(&c.g.node, "node", c.g.node, "comma-separated host:port of nodes' HTTP APIs, asked in order until one answers ($PARTITACTL_NODE)")
	fs.StringVar(&c.g.bind, "bind", c.g.bind, "local IP address to ask from, for nodes whose --http-admin-allow admits only some addresses ($PARTITACTL_BIND)")
	fs.StringVar(&c.g.token, "token", c.g.token, "the nodes' --http-admin-token, sent as a bearer token; prefer $PARTITACTL_TOKEN, which other users cannot read")
	fs.DurationVar(&c.g.request, "request-timeout", c.g.request, "longest wait for one node's answer")
	fs.Usage = func() {
		if name == "partitactl" {
			c.help(c.errOut)
			fmt.Fprintln(c.errOut, "\nFlags:")
		} else {
			fmt.Fprintf(c.errOut, "Usage: partitactl %s %s\n\nFlags:\n", name, usage)
		}
		fs.PrintDefaults()
	}
	return fs
}

// parse reads a command's flags, which may come before, between or after
// its arguments, and checks it got want arguments.
func parse(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
			return nil, err
		} else if err != nil {
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != want {
		fs.Usage()
		return nil, usageError{fmt.Sprintf("%s takes %d argument(s), got %d: %s", fs.Name(), want, len(pos), strings.Join(pos, " "))}
	}
	return pos, nil
}

// client asks the nodes of --node, from --bind.
func (c *cli) client() (*client, error) {
	var nodes []string
	for _, n := range strings.Split(c.g.node, ",") {
		if n = strings.TrimSpace(n); n != "" {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, usageError{"no node to ask: set --node"}
	}
	var local *net.TCPAddr
	if c.g.bind != "" {
		ip := net.ParseIP(c.g.bind)
		if ip == nil {
			return nil, usageError{fmt.Sprintf("--bind %q is not an IP address", c.g.bind)}
		}
		local = &net.TCPAddr{IP: ip}
	}
	return newClient(nodes, local, c.g.token, c.g.request), nil
}
