package replication

import (
	"github.com/partitamq/partita/messages"
	"google.golang.org/protobuf/proto"
)

// maxBatchBytes bounds the frames packed into one message, well under
// maxFrameSize; a frame bigger than this goes alone.
const maxBatchBytes = 4 << 20

// batched packs frames queued together into as few messages as fit in
// maxBatchBytes, in order: on a busy stream each send and each receive then
// carries many writes or acks instead of one. A lone frame stays as it is.
func batched[F proto.Message](frames []F, wrap func([]F) F) []F {
	if len(frames) < 2 {
		return frames
	}
	var out, cur []F
	size := 0
	flush := func() {
		switch len(cur) {
		case 0:
		case 1:
			out = append(out, cur[0])
		default:
			out = append(out, wrap(cur))
		}
		cur, size = nil, 0
	}
	for _, f := range frames {
		n := proto.Size(f)
		if size > 0 && size+n > maxBatchBytes {
			flush()
		}
		cur = append(cur, f)
		size += n
	}
	flush()
	return out
}

func leaderBatch(frames []*messages.LeaderFrame) *messages.LeaderFrame {
	return &messages.LeaderFrame{Body: &messages.LeaderFrame_Batch{Batch: &messages.LeaderBatch{Frames: frames}}}
}

func followerBatch(frames []*messages.FollowerFrame) *messages.FollowerFrame {
	return &messages.FollowerFrame{Body: &messages.FollowerFrame_Batch{Batch: &messages.FollowerBatch{Frames: frames}}}
}
