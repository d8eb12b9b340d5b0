package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// target is the server a workload talks to and the stream it uses; the
// stream's only subject is its name, as an NSQ topic is.
type target struct {
	server string
	stream string
}

func (t *target) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&t.server, "server", nats.DefaultURL, "URL of the server to connect to (the stream's leader)")
	fs.StringVar(&t.stream, "stream", "sub_bench", "stream to use; also its subject")
}

func (t target) validate() error {
	switch {
	case t.server == "":
		return errors.New("--server is empty")
	case !validName(t.stream):
		return fmt.Errorf("--stream %q is not a valid stream name", t.stream)
	}
	return nil
}

// validName accepts names that are a stream name and a one-token subject
// at once.
func validName(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == '.' || r == '*' || r == '>' || r == '/' || r == '\\' || r == 0x7f {
			return false
		}
	}
	return true
}

// connect opens one client connection with JetStream on it.
func connect(url string, opts ...jetstream.JetStreamOpt) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(url, nats.Name("natsbench"), nats.Timeout(5*time.Second), nats.MaxReconnects(0))
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	js, err := jetstream.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
