// Package replication is the node-to-node transport of the write flow: a
// leader's replica actor opens one gRPC bidirectional stream per (partition,
// follower) and the follower's Server hands every frame to its partitions.
//
// Both ends send a heartbeat every Options.Heartbeat and count the peer down
// when nothing at all arrives for Options.DownAfter, so a follower that dies,
// hangs or is SIGSTOPped with its TCP connection still open is noticed in
// well under a second, long before a write would time out.
package replication

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
)

// The service is defined by hand (there is no protoc here); the messages are
// the generated ones from package messages, carried by grpc's proto codec.
const (
	serviceName  = "partita.Replication"
	streamMethod = "/" + serviceName + "/Stream"
)

// maxFrameSize bounds one frame either way: a 5 MiB MPUB batch encoded with
// its length prefixes plus the write's headers fits with room to spare.
const maxFrameSize = 16 << 20

const defaultHeartbeat = 200 * time.Millisecond

// streamHandler is what grpc.RegisterService checks the Server against.
type streamHandler interface {
	serveStream(grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*streamHandler)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(streamHandler).serveStream(ss) },
		ServerStreams: true,
		ClientStreams: true,
	}},
}

// Options tune one end of a stream.
type Options struct {
	// NodeID names this node in the heartbeats it sends.
	NodeID string
	// Heartbeat is how often this end sends a heartbeat; 200ms if zero.
	Heartbeat time.Duration
	// DownAfter is how long the peer may stay silent before it counts as
	// down; 3×Heartbeat if zero, so 600ms by default.
	DownAfter time.Duration
	// TLS, if set, makes the server accept only mutual-TLS peers.
	TLS *TLS
}

// Errors a Stream reports to onDown and returns from Send.
var (
	// ErrClosed: Close was called.
	ErrClosed = errors.New("replication: stream closed")
	// ErrSilent: nothing, not even a heartbeat, arrived for DownAfter.
	ErrSilent = errors.New("replication: peer silent")
	// ErrEnded: the follower ended the stream.
	ErrEnded = errors.New("replication: stream ended by the follower")
)

func (o Options) withDefaults() (Options, error) {
	if o.Heartbeat < 0 || o.DownAfter < 0 {
		return o, fmt.Errorf("replication: negative heartbeat %v or down-after %v", o.Heartbeat, o.DownAfter)
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = defaultHeartbeat
	}
	if o.DownAfter == 0 {
		o.DownAfter = 3 * o.Heartbeat
	}
	// At or below one heartbeat interval, every ordinary pause between two
	// heartbeats would look like a dead peer.
	if o.DownAfter <= o.Heartbeat {
		return o, fmt.Errorf("replication: down-after %v must exceed the heartbeat %v", o.DownAfter, o.Heartbeat)
	}
	return o, nil
}
