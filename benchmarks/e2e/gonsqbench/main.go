// Command gonsqbench drives an NSQ server the way most applications do,
// with go-nsq v1.1.0: "pub" publishes one message at a time on one
// Producer, each waiting for its answer; "read" consumes with one Consumer
// at max_in_flight 2500, finishing each message. Both end with the line
// nsq's bench tools print, "duration: D - X mb/s - Y ops/s", so run.sh
// reads every tool alike.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/nsqio/go-nsq"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

type options struct {
	mode, addr, topic, channel string
	size                       int
	runfor                     time.Duration
}

func parse(args []string) (options, error) {
	if len(args) == 0 || (args[0] != "pub" && args[0] != "read") {
		return options{}, errors.New("usage: gonsqbench pub|read --nsqd-tcp-address=A --topic=T [--channel=C] [--size=N] [--runfor=D]")
	}
	o := options{mode: args[0]}
	fs := flag.NewFlagSet("gonsqbench "+args[0], flag.ContinueOnError)
	fs.StringVar(&o.addr, "nsqd-tcp-address", "127.0.0.1:4150", "server to publish to or consume from")
	fs.StringVar(&o.topic, "topic", "sub_bench", "topic")
	fs.StringVar(&o.channel, "channel", "ch", "channel (read)")
	fs.IntVar(&o.size, "size", 200, "message body size in bytes (pub)")
	fs.DurationVar(&o.runfor, "runfor", 10*time.Second, "how long to run")
	if err := fs.Parse(args[1:]); err != nil {
		return options{}, err
	}
	if o.size <= 0 || o.runfor <= 0 {
		return options{}, fmt.Errorf("--size and --runfor must be positive, got %d and %s", o.size, o.runfor)
	}
	return o, nil
}

func run(args []string, out io.Writer) error {
	o, err := parse(args)
	if err != nil {
		return err
	}
	cfg := nsq.NewConfig()
	var n int64
	var took time.Duration
	if o.mode == "pub" {
		n, took, err = publish(o, cfg)
	} else {
		n, took, err = consume(o, cfg)
	}
	if err != nil {
		return err
	}
	report(out, n, int64(o.size), took)
	return nil
}

// publish sends one message at a time until runfor has passed, as
// Producer.Publish does: each waits for the server's OK.
func publish(o options, cfg *nsq.Config) (int64, time.Duration, error) {
	p, err := nsq.NewProducer(o.addr, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer p.Stop()
	p.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
	body := make([]byte, o.size)
	var n int64
	start := time.Now()
	for time.Since(start) < o.runfor {
		if err := p.Publish(o.topic, body); err != nil {
			return n, time.Since(start), fmt.Errorf("publish %d: %w", n+1, err)
		}
		n++
	}
	return n, time.Since(start), nil
}

// consume finishes every message it gets until runfor has passed, and
// counts them.
func consume(o options, cfg *nsq.Config) (int64, time.Duration, error) {
	cfg.MaxInFlight = 2500
	c, err := nsq.NewConsumer(o.topic, o.channel, cfg)
	if err != nil {
		return 0, 0, err
	}
	c.SetLogger(log.New(io.Discard, "", 0), nsq.LogLevelError)
	var n atomic.Int64
	c.AddHandler(nsq.HandlerFunc(func(*nsq.Message) error { n.Add(1); return nil }))
	start := time.Now()
	if err := c.ConnectToNSQD(o.addr); err != nil {
		return 0, 0, err
	}
	time.Sleep(o.runfor) // the measurement's length, not a synchronisation
	took := time.Since(start)
	got := n.Load()
	c.Stop()
	<-c.StopChan
	return got, took, nil
}

// report prints nsq's bench tools' last line.
func report(out io.Writer, n, size int64, took time.Duration) {
	secs := took.Seconds()
	fmt.Fprintf(out, "duration: %s - %.03fmb/s - %.03fops/s\n", took, float64(n*size)/secs/(1<<20), float64(n)/secs)
}
