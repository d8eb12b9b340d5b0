package protocol

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/partitamq/partita/broker"
)

// subAdvanced is youzan's SUB_ADVANCED <topic> <channel> <partition>
// [<position>]: a one-partition SUB whose first consumer may first move the
// channel to a start position (timestamp:<sec>, msgcount:<n>,
// virtual_queue:<bytes> or special:-1), on the leader and every ISR member,
// exactly as /channel/setoffset does. Later consumers join wherever the
// channel is. Message frames carry the queue offset and size, as for
// SUB_ORDERED.
func (s *session) subAdvanced(params [][]byte) error {
	const cmd = "SUB_ADVANCED"
	if s.state.Load() != stateInit {
		return Fatal(E_INVALID, "cannot %s in current state", cmd)
	}
	if len(params) < 3 {
		return Fatal(E_INVALID, "%s insufficient number of parameters", cmd)
	}
	if len(params) > 3 {
		sp, err := broker.ParseStartPosition(string(params[3]))
		if err != nil {
			return Fatal(E_INVALID, "%s invalid start position %q: %s", cmd, params[3], err)
		}
		if err := s.startAt(string(params[0]), string(params[1]), string(params[2]), sp); err != nil {
			return err
		}
	}
	return s.sub(params[:3], false, true)
}

// startAt positions the channel for its first consumer.
func (s *session) startAt(topicName, chanName, partition string, sp broker.StartPosition) error {
	const cmd = "SUB_ADVANCED"
	if !IsValidTopicName(topicName) || !IsValidChannelName(chanName) {
		return nil // sub answers the bad name
	}
	p, err := strconv.Atoi(partition)
	if err != nil || p < 0 {
		return nil // sub answers the bad partition
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	t, err := s.srv.Broker.CreateTopic(ctx, topicName, 0)
	if err != nil {
		return Fatal(E_SUB_FAILED, "%s failed %s", cmd, err)
	}
	if !t.Leads(p) {
		return NonFatal(E_FAILED_ON_NOT_LEADER, "%s partition %d not led by this node", cmd, p)
	}
	if err := s.srv.Broker.ChannelForSub(ctx, t, chanName); errors.Is(err, broker.ErrChannelNotRegistered) {
		return Fatal(E_SUB_CHANNEL_NOT_REGISTERED, "%s failed %s", cmd, err)
	} else if err != nil {
		return Fatal(E_SUB_FAILED, "%s failed %s", cmd, err)
	}
	if t.Consumers(chanName) > 0 {
		return nil // honoured for the first client only
	}
	if _, err := s.srv.Broker.SetChannelOffset(ctx, t, p, chanName, sp); err != nil {
		return Fatal(E_SUB_FAILED, "%s failed to set the start position: %s", cmd, err)
	}
	return nil
}
