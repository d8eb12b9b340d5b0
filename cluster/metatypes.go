package cluster

import "encoding/json"

// TopicMeta and ChannelMeta mirror messages.TopicMeta and
// messages.ChannelMeta. Until that package exists they are stored as JSON;
// switching to protobuf only changes the four functions below.

type TopicMeta struct {
	Name            string
	Partitions      int32
	Replicas        int32
	Paused          bool
	CreatedUnixNano int64
}

type ChannelMeta struct {
	Topic  string
	Name   string
	Paused bool
}

func marshalTopic(m TopicMeta) ([]byte, error) { return json.Marshal(m) }

func unmarshalTopic(b []byte) (TopicMeta, error) {
	var m TopicMeta
	err := json.Unmarshal(b, &m)
	return m, err
}

func marshalChannel(m ChannelMeta) ([]byte, error) { return json.Marshal(m) }

func unmarshalChannel(b []byte) (ChannelMeta, error) {
	var m ChannelMeta
	err := json.Unmarshal(b, &m)
	return m, err
}
