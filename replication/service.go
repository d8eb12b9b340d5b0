// Package replication is the node-to-node transport of the write flow. A
// leader node holds one session to each follower node: a TCP connection
// (mutual TLS if configured) carrying length-prefixed protobuf frames from
// package messages each way, for every partition the two nodes share. Each
// replica actor opens a Stream on its follower's session; every frame names
// its partition, and the follower's Server hands each to that partition.
// Frames of any partitions queued together leave in one write, so the cost
// of a session does not grow with the partitions on it.
//
// It is plain TCP rather than gRPC because every write crosses it twice on
// its way to an ack: gRPC added a goroutine hand-off each way on each node
// (its HTTP/2 writer and reader) and HTTP/2 framing and flow control, and
// measured end to end that cost about a sixth of the replicated PUB's p99
// and a quarter of its median (benchmarks/e2e/README.md).
//
// A session, not a stream, sends a heartbeat every Options.Heartbeat and
// counts its peer down when nothing at all arrives for Options.DownAfter,
// so a follower that dies, hangs or is SIGSTOPped with its TCP connection
// still open is noticed in well under a second, and every partition on the
// session hears of it at once. No partition waits on another's window: the
// partition actor bounds what each has in flight (--write-window), and the
// follower hands frames to its partitions' mailboxes without waiting.
package replication

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// maxFrameSize bounds one frame either way: a 5 MiB MPUB batch encoded with
// its length prefixes plus the write's headers fits with room to spare.
const maxFrameSize = 16 << 20

const defaultHeartbeat = 200 * time.Millisecond

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
	// Logger hears of connections the server refused (a failed TLS
	// handshake, a peer that is not a leader); slog.Default if nil.
	Logger *slog.Logger
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
	if o.Logger == nil {
		o.Logger = slog.Default()
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
