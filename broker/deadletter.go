package broker

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/topic"
	"github.com/partitamq/partita/cluster"
	"github.com/partitamq/partita/storage"
)

// Dead letters (docs/replication.md#dead-letters): a channel's message
// past its max_attempts is published to the dead-letter topic
// <topic>.dead, made on first use as an ext topic with the source topic's
// partitions and replicas, to the partition of the same number (modulo
// its count), with a JSON header naming where it came from. The channel
// confirms it once the publish is acknowledged.

// DeadLetterSuffix makes a topic's dead-letter topic's name.
const DeadLetterSuffix = ".dead"

// DeadLetterTopic is the dead-letter topic of a topic.
func DeadLetterTopic(topicName string) string { return topicName + DeadLetterSuffix }

// The header keys naming a dead letter's origin; the values are strings,
// so that youzan's ext filters match them.
const (
	HeaderOriginTopic      = topic.HeaderOriginTopic
	HeaderOriginPartition  = topic.HeaderOriginPartition
	HeaderOriginChannel    = topic.HeaderOriginChannel
	HeaderOriginMsgID      = "##origin_msg_id"      // 16 hex digits, as clients see IDs
	HeaderOriginAttempts   = "##origin_attempts"    // deliveries it had
	HeaderOriginRequeuedAt = "##origin_requeued_at" // its last REQ or timeout, RFC 3339 in UTC
)

// deadLetters is the dead-letter publisher of t's channels; a topic whose
// <topic>.dead is no topic name (an ephemeral one, one whose name leaves
// no room for the suffix) has none, and its channels take no
// max_attempts: their dead letters would wait for ever.
func (b *Broker) deadLetters(t *Topic) channel.DeadLetterPublisher {
	if t.Ephemeral || cluster.ValidTopicName(DeadLetterTopic(t.Name)) != nil {
		return nil
	}
	return b
}

// PublishDeadLetter publishes a channel's dead letter on a goroutine of
// its own and calls done with the answer: the channel actor does not wait.
func (b *Broker) PublishDeadLetter(from channel.DeadLetterOrigin, l channel.DeadLetter, done func(channel.DeadLetterPlace, error)) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ForwardTimeout)
		defer cancel()
		done(b.publishDeadLetter(ctx, from, l))
	}()
}

func (b *Broker) publishDeadLetter(ctx context.Context, from channel.DeadLetterOrigin, l channel.DeadLetter) (channel.DeadLetterPlace, error) {
	name := DeadLetterTopic(from.Topic)
	t := b.Topic(name)
	if t == nil {
		spec := TopicSpec{Ext: true}
		if src := b.Topic(from.Topic); src != nil {
			spec.Partitions, spec.Replicas = src.NumPartitions(), src.Replicas
		}
		var err error
		if t, err = b.CreateTopicWith(ctx, name, spec); err != nil {
			return channel.DeadLetterPlace{}, err
		}
	}
	p := int(from.Partition) % t.NumPartitions()
	to := channel.DeadLetterPlace{Topic: name, Partition: int32(p)}
	bodies := [][]byte{l.Body}
	if !t.Ext() {
		// A dead-letter topic made by hand without ext takes the body
		// alone; Publish forwards to a leader elsewhere.
		return answered(to, func(reply func(topic.Reply)) { b.Publish(t, p, bodies, 0, reply) })
	}
	header := deadLetterHeader(from, l)
	// As /pub_ext takes them at a leader elsewhere: the message's own
	// ##msg_id and ##trace_id stay its own.
	var ids []string
	if id := topic.MsgIDOf(header); id != "" {
		ids = []string{id}
	}
	to, err := answered(to, func(reply func(topic.Reply)) {
		b.PublishExt(t, p, bodies, [][]byte{header}, traceOf(header), ids, reply)
	})
	if !errors.Is(err, topic.ErrNotLeader) || b.cfg.Assignments == nil {
		return to, err
	}
	if err := b.forwardExt(ctx, name, int32(p), l.Body, header); err != nil {
		return to, err
	}
	return to, nil
}

// answered runs a publish and waits for its reply.
func answered(to channel.DeadLetterPlace, publish func(reply func(topic.Reply))) (channel.DeadLetterPlace, error) {
	done := make(chan topic.Reply, 1)
	publish(func(r topic.Reply) { done <- r })
	r := <-done
	if r.Err != nil {
		return to, r.Err
	}
	to.ID = r.MsgID
	return to, nil
}

// traceOf is the trace ID a header's ##trace_id names, as PUB_EXT takes
// it, nil for none.
func traceOf(header []byte) []uint64 {
	var fields struct {
		Trace string `json:"##trace_id"`
	}
	if json.Unmarshal(header, &fields) != nil || fields.Trace == "" {
		return nil
	}
	id, err := strconv.ParseUint(fields.Trace, 10, 64)
	if err != nil {
		return nil
	}
	return []uint64{id}
}

// deadLetterHeader is a dead letter's JSON header: the message's own
// header, if any, with the keys naming its origin. A header that would
// grow past the limit keeps the origin alone.
func deadLetterHeader(from channel.DeadLetterOrigin, l channel.DeadLetter) []byte {
	var id [16]byte
	storage.EncodeID(id[:], l.ID)
	origin := map[string]string{
		HeaderOriginTopic:      from.Topic,
		HeaderOriginPartition:  strconv.Itoa(int(from.Partition)),
		HeaderOriginChannel:    from.Channel,
		HeaderOriginMsgID:      string(id[:]),
		HeaderOriginAttempts:   strconv.Itoa(int(l.Attempts)),
		HeaderOriginRequeuedAt: time.Unix(0, l.RequeuedAt).UTC().Format(time.RFC3339Nano),
	}
	fields := map[string]json.RawMessage{}
	if len(l.Header) > 0 {
		_ = json.Unmarshal(l.Header, &fields) // stored headers are JSON objects
	}
	for k, v := range origin {
		fields[k], _ = json.Marshal(v)
	}
	if out, err := json.Marshal(fields); err == nil && len(out) <= storage.MaxHeaderSize {
		return out
	}
	out, _ := json.Marshal(origin)
	return out
}
